// The softmax ladder's naive rung (docs/kernels/softmax.md, "Naive"): one
// thread per row, three sweeps. The shipped kernel is kernels/cuda/softmax.cu
// (a warp per row, online max and sum). f32. Reference: kernels/cpu/softmax.cpp.
#include <cmath>

#include "kernels/cuda/ladder.h"
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
}  // namespace

void ladder_softmax_forward_naive(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream) {
  if (rows == 0 || C == 0) return;
  LAUNCH_KERNEL(softmax_forward_naive_kernel, ceil_div(rows, kThreads), kThreads, 0, as_stream(stream), x, y, rows, C,
                causal);
}

}  // namespace eng::ENGINE_GPU_NS
