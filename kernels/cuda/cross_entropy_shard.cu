// Softmax cross-entropy over a vocabulary split across ranks (Megatron-LM's
// vocab-parallel cross-entropy), the kernels between its all-reduces; the
// formulas are in cross_entropy_shard.h. Reference: kernels/cpu/
// cross_entropy_shard.cpp. One pass over the logits forward (the online
// softmax of online_softmax.cuh gives max and sum together), one backward;
// the full logits are never gathered.
// Conventions: fp32 math whatever the storage T; outputs written with =.
#include <cmath>

#include "kernels/cuda/cross_entropy_shard.h"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kStatsThreads = 256;
}

// One block per row (grid-stride), kStatsThreads threads: each folds a
// strided share of the row's Vv real columns into a MaxSum, the block merges
// them; thread 0 writes m, s and the target's logit when this shard holds it.
// A shard without real columns writes {-inf, 0}.
// bytes = N Vv sizeof(T) + 16 N; flops ~ 5 N Vv.
template <typename T>
__global__ void __launch_bounds__(kStatsThreads)
    ce_shard_stats_kernel(const T* __restrict__ logits, const int32_t* __restrict__ targets, int64_t N, int64_t V,
                          int64_t Vv, int64_t start, float* __restrict__ m, float* __restrict__ s,
                          float* __restrict__ t) {
  __shared__ MaxSum smem_part[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T* x = logits + r * V;
    MaxSum acc{-INFINITY, 0.f};
    for (int64_t v = threadIdx.x; v < Vv; v += blockDim.x) fold(acc, to_f32(x[v]));
    const MaxSum row = block_merge(acc, smem_part);
    if (threadIdx.x == 0) {
      const int64_t local = int64_t(targets[r]) - start;
      m[r] = row.m;
      s[r] = row.s;
      t[r] = local >= 0 && local < Vv ? to_f32(x[local]) : 0.f;
    }
  }
}

// s[r] *= exp(m[r] - M[r]); a shard that saw nothing (m = -inf) keeps 0.
// Launch: grid-stride, 256 threads. bytes = 16 N; flops = 2 N.
__global__ void ce_shard_rescale_kernel(const float* __restrict__ m, const float* __restrict__ M, float* __restrict__ s,
                                        int64_t N) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < N; r += int64_t(gridDim.x) * blockDim.x)
    s[r] = m[r] == -INFINITY ? 0.f : s[r] * expf(m[r] - M[r]);
}

// lse = M + log S; loss = lse - T, 0 for ignored rows. Launch: grid-stride,
// 256 threads. bytes = 24 N; flops = 3 N.
__global__ void ce_shard_finish_kernel(const float* __restrict__ M, const float* __restrict__ S,
                                       const float* __restrict__ T, const int32_t* __restrict__ targets, int64_t N,
                                       int32_t ignore_index, float* __restrict__ losses, float* __restrict__ lse) {
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < N; r += int64_t(gridDim.x) * blockDim.x) {
    lse[r] = M[r] + logf(S[r]);
    losses[r] = targets[r] == ignore_index ? 0.f : lse[r] - T[r];
  }
}

// d = counts[0] (exp(x - lse) - onehot) on real columns, 0 on padding and on
// ignored rows. Launch: grid-stride over the N V elements, 256 threads.
// bytes = N (Vv + V) sizeof(T) (real columns read, all written) + 8 N; flops ~ 4 N Vv.
template <typename T>
__global__ void ce_shard_backward_kernel(const T* __restrict__ logits, const float* __restrict__ lse,
                                         const int32_t* __restrict__ targets, int64_t N, int64_t V, int64_t Vv,
                                         int64_t start, int32_t ignore_index, const float* __restrict__ counts,
                                         T* __restrict__ d) {
  const float scale = counts[0];
  const int64_t n = N * V, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / V, v = i - r * V;
    float g = 0.f;
    if (v < Vv && targets[r] != ignore_index) {
      const float onehot = int64_t(targets[r]) - start == v ? 1.f : 0.f;
      g = scale * (expf(to_f32(logits[i]) - lse[r]) - onehot);
    }
    d[i] = from_f32<T>(g);
  }
}

void ce_shard_stats(gpu::Storage st, const void* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vv,
                    int64_t start, float* m, float* s, float* t, void* stream) {
  if (N == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(ce_shard_stats_kernel<T>, grid_for(N, 1), kStatsThreads, 0, as_stream(stream),
                  static_cast<const T*>(logits), targets, N, V, Vv, start, m, s, t);
  });
}

void ce_shard_rescale(const float* m, const float* M, float* s, int64_t N, void* stream) {
  if (N == 0) return;
  LAUNCH_KERNEL(ce_shard_rescale_kernel, grid_for(N, 256), 256, 0, as_stream(stream), m, M, s, N);
}

void ce_shard_finish(const float* M, const float* S, const float* T, const int32_t* targets, int64_t N,
                     int32_t ignore_index, float* losses, float* lse, void* stream) {
  if (N == 0) return;
  LAUNCH_KERNEL(ce_shard_finish_kernel, grid_for(N, 256), 256, 0, as_stream(stream), M, S, T, targets, N, ignore_index,
                losses, lse);
}

void ce_shard_backward(gpu::Storage st, const void* logits, const float* lse, const int32_t* targets, int64_t N,
                       int64_t V, int64_t Vv, int64_t start, int32_t ignore_index, const float* counts, void* dlogits,
                       void* stream) {
  if (N == 0 || V == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(ce_shard_backward_kernel<T>, grid_for(N * V, 256), 256, 0, as_stream(stream),
                  static_cast<const T*>(logits), lse, targets, N, V, Vv, start, ignore_index, counts,
                  static_cast<T*>(dlogits));
  });
}

}  // namespace eng::ENGINE_GPU_NS
