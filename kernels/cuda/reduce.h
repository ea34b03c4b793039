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

// Costs (kernels/kernel_cost.h): sum_dim and broadcast_dim: bytes = (outer
// n inner + outer inner) sizeof(T), flops = outer n inner. mse_forward:
// bytes = 2 n sizeof(T) + 8 blocks (the partials written), then 8 blocks +
// sizeof(T) (read, the mean written), flops = 3 n + blocks, blocks =
// ceil(n / 2048) in [1, kMseScratch] (the CUDA grid). mse_backward: bytes =
// 3 n sizeof(T), flops = 4 n.
namespace eng::kcost {
inline kprof::Cost sum_dim(gpu::Storage st, const void*, void*, int64_t outer, int64_t n, int64_t inner, float, void*) {
  const double in = double(outer) * double(n) * double(inner), out = double(outer) * double(inner);
  return kprof::memory((in + out) * gpu::storage_bytes(st), in);
}
inline kprof::Cost broadcast_dim(gpu::Storage st, const void*, void*, float, int64_t outer, int64_t n, int64_t inner,
                                 void*) {
  const double in = double(outer) * double(inner), out = double(outer) * double(n) * double(inner);
  return kprof::memory((in + out) * gpu::storage_bytes(st), out);
}
inline kprof::Cost mse_forward(gpu::Storage st, const void*, const void*, int64_t n, double*, void*, void*) {
  const int64_t want = (n + 2047) / 2048;
  const double blocks = double(want < 1 ? 1 : want > gpu::kMseScratch ? gpu::kMseScratch : want);
  return kprof::memory(2 * double(n) * gpu::storage_bytes(st) + 16 * blocks + gpu::storage_bytes(st),
                       3 * double(n) + blocks);
}
inline kprof::Cost mse_backward(gpu::Storage st, const void*, const void*, const void*, void*, int64_t n, void*) {
  return kprof::memory(3 * double(n) * gpu::storage_bytes(st), 4 * double(n));
}
}  // namespace eng::kcost
