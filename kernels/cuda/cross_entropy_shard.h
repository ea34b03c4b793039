// Launchers of kernels/cuda/cross_entropy_shard.cu: softmax cross-entropy
// when the vocabulary is split over ranks (tensor parallel). Each rank holds
// logits (N, V) = columns [start, start + V) of the full logits; only its
// first Vv columns are real ids (the rest pad the vocabulary and take no
// part). The engine op (engine/ops/cross_entropy_sharded.cpp) runs:
//   stats    m_r = max, s_r = sum exp(x - m_r) over my Vv columns,
//            t_r = x_r,target if the target is mine, else 0
//   (all-reduce max of m -> M)
//   rescale  s_r *= exp(m_r - M_r)                  (my sum at the global max)
//   (all-reduce sum of s and t -> S, T)
//   finish   lse_r = M_r + log S_r, loss_r = lse_r - T_r (0 for ignored rows)
//   backward d_rv = scale (exp(x_rv - lse_r) - [v == target_r - start]),
//            0 on padding columns and ignored rows; scale = counts[0] (1/valid).
// Statistics are fp32 whatever the storage of the logits.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_CROSS_ENTROPY_SHARD_LAUNCHERS                                                                         \
  void ce_shard_stats(gpu::Storage st, const void* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vv, \
                      int64_t start, float* m, float* s, float* t, void* stream);                                    \
  void ce_shard_rescale(const float* m, const float* M, float* s, int64_t N, void* stream);                          \
  void ce_shard_finish(const float* M, const float* S, const float* T, const int32_t* targets, int64_t N,            \
                       int32_t ignore_index, float* losses, float* lse, void* stream);                               \
  void ce_shard_backward(gpu::Storage st, const void* logits, const float* lse, const int32_t* targets, int64_t N,   \
                         int64_t V, int64_t Vv, int64_t start, int32_t ignore_index, const float* counts,            \
                         void* dlogits, void* stream);
ENGINE_GPU_DECLARE(ENGINE_CROSS_ENTROPY_SHARD_LAUNCHERS)

// Costs (kernels/kernel_cost.h): stats: bytes = N Vv sizeof(T) + 16 N,
// flops ~ 5 N Vv. rescale: bytes = 16 N, flops = 2 N. finish: bytes = 24 N,
// flops = 3 N. backward: bytes = N Vv sizeof(T) (the real columns read) +
// N V sizeof(T) (all written) + 8 N, flops ~ 4 N Vv.
namespace eng::kcost {
inline kprof::Cost ce_shard_stats(gpu::Storage st, const void*, const int32_t*, int64_t N, int64_t, int64_t Vv, int64_t,
                                  float*, float*, float*, void*) {
  return kprof::memory(double(N) * double(Vv) * gpu::storage_bytes(st) + 16 * double(N), 5 * double(N) * double(Vv));
}
inline kprof::Cost ce_shard_rescale(const float*, const float*, float*, int64_t N, void*) {
  return kprof::memory(16 * double(N), 2 * double(N));
}
inline kprof::Cost ce_shard_finish(const float*, const float*, const float*, const int32_t*, int64_t N, int32_t, float*,
                                   float*, void*) {
  return kprof::memory(24 * double(N), 3 * double(N));
}
inline kprof::Cost ce_shard_backward(gpu::Storage st, const void*, const float*, const int32_t*, int64_t N, int64_t V,
                                     int64_t Vv, int64_t, int32_t, const float*, void*, void*) {
  return kprof::memory(double(N) * double(V + Vv) * gpu::storage_bytes(st) + 8 * double(N), 4 * double(N) * double(Vv));
}
}  // namespace eng::kcost
