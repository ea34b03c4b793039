// Launchers of kernels/cuda/reduce.cu: a sum along one dimension (sum and
// mean of the engine, the ViT's token mean) with its broadcast backward, and
// the mean squared error with its gradient. Views as (outer, n, inner): the
// dimension reduced is the middle one. Scalars (the loss, its incoming
// gradient) stay on the device, so a captured step replays them.
// Reference: kernels/cpu/reduce.cpp and kernels/cpu/loss.cpp.
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// Doubles of scratch mse_forward needs: one partial sum per block.
inline constexpr int64_t kMseScratch = 1024;
}  // namespace eng::gpu

#define ENGINE_REDUCE_LAUNCHERS                                                                                       \
  void sum_dim(gpu::Storage st, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, float alpha,       \
               void* stream);                                                                                         \
  void broadcast_dim(gpu::Storage st, const void* g, void* dx, float alpha, int64_t outer, int64_t n, int64_t inner,  \
                     void* stream);                                                                                   \
  void mse_forward(gpu::Storage st, const void* pred, const void* target, int64_t n, double* d_scratch, void* out,    \
                   void* stream);                                                                                     \
  void mse_backward(gpu::Storage st, const void* pred, const void* target, const void* dloss, void* dpred, int64_t n, \
                    void* stream);
ENGINE_GPU_DECLARE(ENGINE_REDUCE_LAUNCHERS)
