// The second half of a deterministic column sum: the rows of partial sums
// that a first kernel's blocks wrote, one row a block (or a chunk of rows),
// added up in a fixed order. Layernorm's and RMSNorm's backward
// (layernorm_backward.cu: dw, db) and the bias gradient apart from its GEMM
// (bias_grad.cu) end with it; no float atomics, so the same bits every run.
#pragma once
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

// partial_sums_reduce_kernel: dw[c] = sum over b of partial[b][c] for the
// first C of cols columns, db[c - C] for the next C, ds[c - 2 C] (fp32,
// written, never added) for the rest (layernorm: cols = 2 C, dw then db, or
// 3 C with dx's column sums; RMSNorm and the bias gradient: cols = C, dw
// alone, db and ds unused),
// in a fixed order: each of a block's 8 thread rows sums the rows b = y,
// y + 8, ... of 32 columns, then row 0 adds the 8 sums in y order. TW: the
// storage type, or float (fp32 gradients of 16-bit weights' masters);
// kAdd: the sums added to dw and db (fp32, a later micro-batch's). A thread
// a column summing every row in turn (the kernel before) left 3 blocks of
// 256 threads running 256 loads each in series: about 30 us a call, most of
// layernorm's backward at GPT-2's B 8 on the H200 (48 us a call in all,
// 23% of HBM).
// Launch: blocks of 32 x kReduceRows threads, grid-stride over tiles of 32
// of the cols columns, grid_for(tiles, 1).
// bytes = nrows cols 4 + cols sizeof(TW) (x2 with kAdd);  flops = nrows cols.
inline constexpr int kReduceRows = 8;
template <typename TW, bool kAdd>
__global__ void __launch_bounds__(32 * kReduceRows)
    partial_sums_reduce_kernel(const float* __restrict__ partial, TW* __restrict__ dw, TW* __restrict__ db,
                               float* __restrict__ ds, int nrows, int C, int cols) {
  __shared__ float sums[kReduceRows][32];
  const int tiles = (cols + 31) / 32;
  for (int tile = int(blockIdx.x); tile < tiles; tile += int(gridDim.x)) {
    const int col = tile * 32 + int(threadIdx.x);
    float s = 0.f;
    if (col < cols)
      for (int b = int(threadIdx.y); b < nrows; b += kReduceRows) s += partial[int64_t(b) * cols + col];
    sums[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
      float t = 0.f;
      for (int y = 0; y < kReduceRows; ++y) t += sums[y][threadIdx.x];
      if (col >= 2 * C) {
        ds[col - 2 * C] = t;
      } else {
        TW* out = col < C ? dw + col : db + (col - C);
        *out = from_f32<TW>(kAdd ? to_f32(*out) + t : t);
      }
    }
    __syncthreads();  // sums is refilled by the next tile
  }
}

}  // namespace eng::ENGINE_GPU_NS
