// The online softmax's running (max, sum) pair and its block reduction, used by
// the fused classifier (cross_entropy.cu) and its vocabulary-sharded twin
// (cross_entropy_shard.cu). Milakov and Gimelshein, "Online normalizer
// calculation for softmax" (2018).
#pragma once
#include <cmath>

#include "kernels/cuda/exp2.cuh"
#include "kernels/cuda/portable.cuh"

namespace eng::ENGINE_GPU_NS {

// A partial softmax denominator: m = max of the values seen, s = sum of
// exp(x - m) over them. Empty: {-inf, 0}. A NaN seen is kept in s (m skips
// it, as fmaxf does), so it reaches the loss: {-inf, NaN} is not empty.
struct MaxSum {
  float m, s;
};

// Folds one value into a running MaxSum (the "online softmax" update: when the
// max grows, the sum so far is rescaled to the new max). A -inf logit adds
// nothing; the guard keeps exp(-inf - -inf) = NaN out of the sum.
__device__ __forceinline__ void fold(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = a.s * expf(a.m - x) + 1.f;
    a.m = x;
  } else {
    a.s += x == -INFINITY ? 0.f : expf(x - a.m);
  }
}

// Folds N values at once: their max first, then one rescale of the running
// sum and e^(x - m) = 2^((x - m) log2 e) a value, an FADD, an FMUL and an
// ex2.approx (exp2.cuh): about 5 instructions a value where fold's branch and
// expf take about 20. The difference is taken before the scale, so the max
// gives exactly 2^0 and no logit's magnitude overflows it (x log2 e - m
// log2 e in one FFMA would leave m log2 e's rounding, which is +-128 once
// |m| > 3e9). A NaN is kept in the sum (fmaxf skips it, exp2 does not).
template <int N>
__device__ __forceinline__ void fold_n(MaxSum& a, const float (&x)[N]) {
  float m = a.m;
#pragma unroll
  for (int k = 0; k < N; ++k) m = fmaxf(m, x[k]);
  // All -inf so far: subtract 0 instead, so 2^(-inf - 0) = 0, not NaN.
  const float ms = m == -INFINITY ? 0.f : m;
  float s = a.s * exp2_approx((a.m - ms) * kLog2e);
#pragma unroll
  for (int k = 0; k < N; ++k) s += exp2_approx((x[k] - ms) * kLog2e);
  a = MaxSum{m, s};
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, a.s + b.s};  // both empty (0), or a NaN that must stay
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
  for (int off = 16; off > 0; off >>= 1)
    v = merge(v, MaxSum{__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)});
  return v;
}

// The block's MaxSum, returned to every thread. Each warp merges the warps'
// partials itself (no broadcast barrier); the closing barrier keeps a fast
// warp from overwriting smem_part for the next row while others still read.
// blockDim.x must be a multiple of 32.
__device__ __forceinline__ MaxSum block_merge(MaxSum v, MaxSum* smem_part) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, nwarps = int(blockDim.x) / 32;
  v = warp_merge(v);
  if (lane == 0) smem_part[warp] = v;
  __syncthreads();
  v = warp_merge(lane < nwarps ? smem_part[lane] : MaxSum{-INFINITY, 0.f});
  __syncthreads();
  return v;
}

}  // namespace eng::ENGINE_GPU_NS
