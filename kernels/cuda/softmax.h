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
