// Launchers of kernels/cuda/layernorm.cu: layernorm over the last dim (C) of
// N rows, forward (saving fp32 mean and rstd per row), the residual add fused
// with the forward, and the backward (dx, dweight, dbias; deterministic).
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// layernorm_backward sums dweight/dbias per block into an fp32 scratch
// buffer of this many floats (2 C per block, at most this many blocks), then
// reduces the blocks' partial sums in a fixed order.
inline constexpr int64_t kLayernormBackwardMaxBlocks = 1024;
inline int64_t layernorm_backward_scratch_floats(int64_t N, int64_t C) {
  return 2 * C * (N < kLayernormBackwardMaxBlocks ? N : kLayernormBackwardMaxBlocks);
}
// The widest row layernorm_backward takes: 2 C fp32 accumulators per block
// must fit the 48 KiB of shared memory a kernel gets without opting in.
inline constexpr int64_t kLayernormBackwardMaxC = 6000;
}  // namespace eng::gpu

#define ENGINE_LAYERNORM_LAUNCHERS                                                                                   \
  void layernorm_forward(gpu::Storage st, const void* x, const void* w, const void* b, void* out, float* mean,       \
                         float* rstd, int64_t N, int64_t C, double eps, void* stream);                               \
  void fused_residual_layernorm_forward(gpu::Storage st, const void* x, const void* r, const void* w, const void* b, \
                                        void* residual, void* out, float* mean, float* rstd, int64_t N, int64_t C,   \
                                        double eps, void* stream);                                                   \
  void layernorm_backward(gpu::Storage st, const void* dout, const void* x, const void* w, const float* mean,        \
                          const float* rstd, void* dx, void* dw, void* db, float* scratch, int64_t N, int64_t C,     \
                          void* stream);
ENGINE_GPU_DECLARE(ENGINE_LAYERNORM_LAUNCHERS)
