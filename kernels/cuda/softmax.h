// Launchers of kernels/cuda/softmax.cu: softmax over the last dim (rows of C
// elements), optionally causal, and its backward.
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// causal: row r is query i = r % C of a (C, C) score block; keys j > i get 0.
enum class SoftmaxMask : uint8_t { none, causal };
}  // namespace eng::gpu

#define ENGINE_SOFTMAX_LAUNCHERS                                                                                \
  void softmax_forward(gpu::Storage st, const void* x, void* y, int64_t rows, int64_t C, gpu::SoftmaxMask mask, \
                       void* stream);                                                                           \
  void softmax_backward(gpu::Storage st, const void* y, const void* dy, void* dx, int64_t rows, int64_t C,      \
                        void* stream);
ENGINE_GPU_DECLARE(ENGINE_SOFTMAX_LAUNCHERS)

// Costs (kernels/kernel_cost.h): forward: bytes = rows C (2 sizeof(T)),
// about half the reads when causal: row r reads its r % C + 1 visible keys,
// (C + 1) / 2 a row on average over whole (C, C) blocks; flops ~ 5 per
// element read. backward: bytes = rows C (3 sizeof(T)), flops = 4 rows C.
namespace eng::kcost {
inline kprof::Cost softmax_forward(gpu::Storage st, const void*, void*, int64_t rows, int64_t C, gpu::SoftmaxMask mask,
                                   void*) {
  const double written = double(rows) * double(C);
  const double read = mask == gpu::SoftmaxMask::causal ? double(rows) * (double(C) + 1) / 2 : written;
  return kprof::memory((read + written) * gpu::storage_bytes(st), 5 * read);
}
inline kprof::Cost softmax_backward(gpu::Storage st, const void*, const void*, void*, int64_t rows, int64_t C, void*) {
  return kprof::memory(3 * double(rows) * double(C) * gpu::storage_bytes(st), 4 * double(rows) * double(C));
}
}  // namespace eng::kcost
