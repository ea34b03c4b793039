// Launchers of kernels/cuda/activation.cu (GELU, tanh form).
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_ACTIVATION_LAUNCHERS                                                      \
  void gelu_forward(gpu::Storage st, const void* x, void* out, int64_t n, void* stream); \
  void gelu_backward(gpu::Storage st, const void* x, const void* dout, void* dx, int64_t n, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ACTIVATION_LAUNCHERS)

// Costs (kernels/kernel_cost.h): bytes = 2 n sizeof(T) forward, 3 n sizeof(T)
// backward; flops ~ 20 n forward, ~30 n backward (tanhf counted as ~10).
namespace eng::kcost {
inline kprof::Cost gelu_forward(gpu::Storage st, const void*, void*, int64_t n, void*) {
  return kprof::memory(2 * double(n) * gpu::storage_bytes(st), 20 * double(n));
}
inline kprof::Cost gelu_backward(gpu::Storage st, const void*, const void*, void*, int64_t n, void*) {
  return kprof::memory(3 * double(n) * gpu::storage_bytes(st), 30 * double(n));
}
}  // namespace eng::kcost
