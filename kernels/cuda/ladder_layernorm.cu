// The layernorm ladder's naive rung (docs/kernels/layernorm.md, "Naive"):
// one thread per row, forward and backward; the shipped kernels are
// kernels/cuda/layernorm.cu (a warp per row forward, a block per row with
// deterministic dw/db backward). f32. Reference: kernels/cpu/layernorm.cpp.
#include <cmath>

#include "kernels/cuda/ladder.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256;

// One thread walks its row three times: mean, variance (two passes, as the
// shipped kernel), then the output. At step c a warp's 32 threads read 32
// rows C floats apart: 32 sectors per load instruction, uncoalesced.
// bytes = 8 N C + 8 C + 8 N (what DRAM must move; the 32-way scattered
// sectors make the real traffic larger); flops ~ 8 N C.
__global__ void layernorm_forward_naive_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                               const float* __restrict__ b, float* __restrict__ out,
                                               float* __restrict__ mean, float* __restrict__ rstd, int64_t N, int64_t C,
                                               float eps) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= N) return;
  const float* xr = x + row * C;
  float s = 0.f;
  for (int64_t c = 0; c < C; ++c) s += xr[c];
  const float m = s / float(C);
  float v = 0.f;
  for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
  const float r = 1.f / sqrtf(v / float(C) + eps);
  for (int64_t c = 0; c < C; ++c) out[row * C + c] = (xr[c] - m) * r * w[c] + b[c];
  mean[row] = m;
  rstd[row] = r;
}

// dx per row by one thread; dw and db by atomicAdd from every row: N C
// float atomics on the same C addresses, summed in whatever order the
// hardware applies them. bytes = 12 N C + 8 N + 4 C + 8 N C (the atomics'
// read-modify-writes, mostly in L2); flops ~ 14 N C.
__global__ void layernorm_backward_naive_kernel(const float* __restrict__ dout, const float* __restrict__ x,
                                                const float* __restrict__ w, const float* __restrict__ mean,
                                                const float* __restrict__ rstd, float* __restrict__ dx, float* dw,
                                                float* db, int64_t N, int64_t C) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= N) return;
  const float m = mean[row], r = rstd[row];
  const float* xr = x + row * C;
  const float* gr = dout + row * C;
  float mg = 0.f, mgx = 0.f;  // mean_c(g) and mean_c(g xhat), g = dout w
  for (int64_t c = 0; c < C; ++c) {
    const float g = gr[c] * w[c];
    mg += g;
    mgx += g * (xr[c] - m) * r;
  }
  mg /= float(C);
  mgx /= float(C);
  for (int64_t c = 0; c < C; ++c) {
    const float xhat = (xr[c] - m) * r;
    dx[row * C + c] = r * (gr[c] * w[c] - mg - xhat * mgx);
    atomicAdd(&dw[c], gr[c] * xhat);
    atomicAdd(&db[c], gr[c]);
  }
}

__global__ void zero_kernel(float* __restrict__ p, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 0.f;
}
}  // namespace

void ladder_layernorm_forward_naive(const float* x, const float* w, const float* b, float* out, float* mean,
                                    float* rstd, int64_t N, int64_t C, double eps, void* stream) {
  if (N == 0 || C == 0) return;
  LAUNCH_KERNEL(layernorm_forward_naive_kernel, ceil_div(N, kThreads), kThreads, 0, as_stream(stream), x, w, b, out,
                mean, rstd, N, C, float(eps));
}

void ladder_layernorm_backward_naive(const float* dout, const float* x, const float* w, const float* mean,
                                     const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C,
                                     void* stream) {
  if (C == 0) return;
  const auto s = as_stream(stream);
  LAUNCH_KERNEL(zero_kernel, ceil_div(C, kThreads), kThreads, 0, s, dw, C);
  LAUNCH_KERNEL(zero_kernel, ceil_div(C, kThreads), kThreads, 0, s, db, C);
  if (N == 0) return;
  LAUNCH_KERNEL(layernorm_backward_naive_kernel, ceil_div(N, kThreads), kThreads, 0, s, dout, x, w, mean, rstd, dx, dw,
                db, N, C);
}

}  // namespace eng::ENGINE_GPU_NS
