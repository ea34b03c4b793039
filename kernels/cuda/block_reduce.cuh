// Block-wide reductions. block_sum: one value per thread, for kernels launched with
// kThreads threads (a multiple of 32, at most 1024): shuffles within each
// warp, then warp 0 adds the warps' partials. The result is valid in thread
// 0. Fixed shuffle and warp order, so the same bits every run
// (deterministic, no atomics). T: float or double.
#pragma once
#include "kernels/cuda/portable.cuh"

namespace eng::gpu {

template <int kThreads, typename T>
__device__ __forceinline__ T block_sum(T s) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block_sum: whole warps, at most 1024 threads");
  __shared__ T smem_warp[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (lane == 0) smem_warp[warp] = s;
  __syncthreads();
  s = T(0);
  if (warp == 0) {
    s = lane < kThreads / 32 ? smem_warp[lane] : T(0);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  }
  return s;
}

// The block's reduction of one float a thread by op (a sum or fmaxf),
// returned to every thread: shuffles within each warp, then every warp
// reduces the warps' partials itself (no broadcast barrier). The xor tree is
// the same in every lane and op commutes, so every thread gets the same bits,
// and every run. part: 32 floats of shared memory, rewritten by the next
// call; a caller alternating two arrays needs no barrier after the reads
// (the other array's barrier separates them). blockDim.x: whole warps.
template <typename Op>
__device__ __forceinline__ float block_allreduce(float v, float* part, float identity, Op op) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, nwarps = int(blockDim.x) / 32;
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < nwarps ? part[lane] : identity;
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace eng::gpu
