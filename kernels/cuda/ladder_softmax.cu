// The softmax ladder (docs/kernels/softmax.md), numbered as the page walks
// it, each rung one idea more than the one before:
//   1 naive: one thread per row, three sweeps (max, sum of exp, divide)
//   2 warp:  a warp per row, the lanes striding it (coalesced), shuffles
//            for the max and the sum; still three sweeps
//   3 vec:   the warp rung with 16-byte loads and stores (4 floats a lane)
//   4 ours:  softmax.cu, the vec rung with the online max and sum (Milakov
//            & Gimelshein): two sweeps instead of three
// f32. Reference: kernels/cpu/softmax.cpp.
#include <cmath>

#include "kernels/cuda/ladder.h"
#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256;

// Causal: row r is query i = r % C and sees keys j <= i; the others get 0.
// Sweep 1 the max, sweep 2 the sum of exp(x - max), sweep 3 the output: x
// is read three times, one dependent load after another, 32 rows apart per
// warp. bytes = 8 rows C (x read once from DRAM, y written); flops ~ 5 rows C.
// x and y may be the same buffer (the naive attention's in-place use): each
// element is read before its own write, so no __restrict__ here.
__global__ void softmax_forward_naive_kernel(const float* x, float* y, int64_t rows, int64_t C, bool causal) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * C;
  float* yr = y + row * C;
  const int64_t len = causal ? row % C + 1 : C;  // the keys this row sees
  float m = -INFINITY;
  for (int64_t j = 0; j < len; ++j) m = fmaxf(m, xr[j]);
  float s = 0.f;
  for (int64_t j = 0; j < len; ++j) s += expf(xr[j] - m);
  for (int64_t j = 0; j < C; ++j) yr[j] = j < len ? expf(xr[j] - m) / s : 0.f;
}

// Rungs 2 and 3: warp w of the grid takes row w; lane l the V elements at
// l V, l V + 32 V, ... (V = 1: scalar loads; V = 4: one 16-byte load a
// lane, 512 bytes a warp instruction, a quarter of the instructions). Lanes
// past the row's keys give -inf to the max and 0 to the sum, and still take
// part in every shuffle. Preconditions: V = 4 only if C % 4 == 0 and x, y
// are 16-byte aligned. bytes = 8 rows C; flops ~ 5 rows C.
template <int V>
__global__ void softmax_forward_warp_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t C,
                                            bool causal) {
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= rows) return;  // a whole warp leaves together
  const float* xr = x + row * C;
  float* yr = y + row * C;
  const int64_t len = causal ? row % C + 1 : C;
  float v[V];
  float m = -INFINITY;
  for (int64_t i = int64_t(lane) * V; i < C; i += 32 * V) {
    rowwise::load_vec<V>(xr + i, v);
    for (int k = 0; k < V; ++k)
      if (i + k < len) m = fmaxf(m, v[k]);
  }
  m = rowwise::warp_max(m);
  float s = 0.f;
  for (int64_t i = int64_t(lane) * V; i < C; i += 32 * V) {
    rowwise::load_vec<V>(xr + i, v);
    for (int k = 0; k < V; ++k)
      if (i + k < len) s += expf(v[k] - m);
  }
  s = rowwise::warp_sum(s);
  for (int64_t i = int64_t(lane) * V; i < C; i += 32 * V) {
    rowwise::load_vec<V>(xr + i, v);
    for (int k = 0; k < V; ++k) v[k] = i + k < len ? expf(v[k] - m) / s : 0.f;
    rowwise::store_vec<V>(yr + i, v);
  }
}
}  // namespace

void ladder_softmax_forward_naive(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream) {
  if (rows == 0 || C == 0) return;
  LAUNCH_KERNEL(softmax_forward_naive_kernel, ceil_div(rows, kThreads), kThreads, 0, as_stream(stream), x, y, rows, C,
                causal);
}

void ladder_softmax_forward_warp(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream) {
  if (rows == 0 || C == 0) return;
  LAUNCH_KERNEL(softmax_forward_warp_kernel<1>, ceil_div(rows, kThreads / 32), kThreads, 0, as_stream(stream), x, y,
                rows, C, causal);
}

// Rows that cannot take 16-byte loads (C % 4 != 0, or a base not aligned)
// run the warp rung: the vec rung is only faster, never different.
void ladder_softmax_forward_vec(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream) {
  if (rows == 0 || C == 0) return;
  if (!rowwise::rows_vectorizable<float>(C, x, y)) return ladder_softmax_forward_warp(x, y, rows, C, causal, stream);
  LAUNCH_KERNEL(softmax_forward_warp_kernel<4>, ceil_div(rows, kThreads / 32), kThreads, 0, as_stream(stream), x, y,
                rows, C, causal);
}

}  // namespace eng::ENGINE_GPU_NS
