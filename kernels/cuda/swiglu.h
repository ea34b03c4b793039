// Launchers of kernels/cuda/swiglu.cu: SwiGLU (Llama's MLP activation) on
// the packed gate|up projection. gu is (N, 2H), each row [gate (H) | up (H)];
// out (N, H) = silu(gate) * up; the backward writes dgu laid out as gu.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_SWIGLU_LAUNCHERS                                                                            \
  void swiglu_forward(gpu::Storage st, const void* gu, void* out, int64_t N, int64_t H, void* stream);     \
  void swiglu_backward(gpu::Storage st, const void* gu, const void* dout, void* dgu, int64_t N, int64_t H, \
                       void* stream);
ENGINE_GPU_DECLARE(ENGINE_SWIGLU_LAUNCHERS)

// Costs (kernels/kernel_cost.h): forward reads gate and up, writes out:
// bytes = 3 N H sizeof(T), flops ~ 8 N H (expf counted as ~4); backward
// reads gate, up, dout, writes dgate, dup: bytes = 5 N H sizeof(T), flops ~ 14 N H.
namespace eng::kcost {
inline kprof::Cost swiglu_forward(gpu::Storage st, const void*, void*, int64_t N, int64_t H, void*) {
  const double nh = double(N) * double(H);
  return kprof::memory(3 * nh * gpu::storage_bytes(st), 8 * nh);
}
inline kprof::Cost swiglu_backward(gpu::Storage st, const void*, const void*, void*, int64_t N, int64_t H, void*) {
  const double nh = double(N) * double(H);
  return kprof::memory(5 * nh * gpu::storage_bytes(st), 14 * nh);
}
}  // namespace eng::kcost
