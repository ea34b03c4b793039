// The layernorm ladder (docs/kernels/layernorm.md), numbered as the page
// walks it, each rung one idea more than the one before:
//   forward   1 naive: one thread per row, three sweeps
//             2 warp:  a warp per row, the lanes striding it (coalesced),
//                      shuffles for the sums
//             3 ours:  layernorm.cu, the warp rung with 16-byte vector loads
//   backward  1 naive: one thread per row for dx; dw, db by atomicAdd
//             2 warp:  a warp per row for dx; dw, db by the same atomics,
//                      now 32 consecutive addresses a warp instruction
//             3 ours:  layernorm.cu, dw, db as per-block partial sums added
//                      in a fixed order (no atomics: the same bits every run),
//                      vector loads
// f32. Reference: kernels/cpu/layernorm.cpp.
#include <cmath>

#include "kernels/cuda/ladder.h"
#include "kernels/cuda/rowwise.cuh"
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
// read-modify-writes, mostly in L2); flops ~ 15 N C.
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

// Rung 2, forward: warp w of the grid takes row w. Lane l reads elements l,
// l + 32, ...: at each step the warp's 32 loads are 128 consecutive bytes,
// 4 sectors instead of the naive rung's 32. The three sweeps stay (the
// second and third hit L1/L2), and so do scalar 4-byte loads.
// bytes = 8 N C + 8 C + 8 N; flops ~ 8 N C.
__global__ void layernorm_forward_warp_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                              const float* __restrict__ b, float* __restrict__ out,
                                              float* __restrict__ mean, float* __restrict__ rstd, int64_t N, int64_t C,
                                              float eps) {
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= N) return;  // a whole warp leaves together: no shuffle loses a lane
  const float* xr = x + row * C;
  float s = 0.f;
  for (int64_t c = lane; c < C; c += 32) s += xr[c];
  const float m = rowwise::warp_sum(s) / float(C);
  float v = 0.f;
  for (int64_t c = lane; c < C; c += 32) v += (xr[c] - m) * (xr[c] - m);
  const float r = 1.f / sqrtf(rowwise::warp_sum(v) / float(C) + eps);
  for (int64_t c = lane; c < C; c += 32) out[row * C + c] = (xr[c] - m) * r * w[c] + b[c];
  if (lane == 0) mean[row] = m, rstd[row] = r;
}

// Rung 2, backward: the naive rung's math with a warp per row: coalesced
// loads, and the atomics of one instruction hit 32 consecutive addresses,
// which L2 applies side by side. Still N C atomics on each of dw and db,
// still in whatever order they land. bytes as the naive rung's.
__global__ void layernorm_backward_warp_kernel(const float* __restrict__ dout, const float* __restrict__ x,
                                               const float* __restrict__ w, const float* __restrict__ mean,
                                               const float* __restrict__ rstd, float* __restrict__ dx, float* dw,
                                               float* db, int64_t N, int64_t C) {
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (row >= N) return;
  const float m = mean[row], r = rstd[row];
  const float* xr = x + row * C;
  const float* gr = dout + row * C;
  float mg = 0.f, mgx = 0.f;
  for (int64_t c = lane; c < C; c += 32) {
    const float g = gr[c] * w[c];
    mg += g;
    mgx += g * (xr[c] - m) * r;
  }
  mg = rowwise::warp_sum(mg) / float(C);
  mgx = rowwise::warp_sum(mgx) / float(C);
  for (int64_t c = lane; c < C; c += 32) {
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

// The atomics rungs add into dw and db: both start at zero.
void zero_dw_db(cudaStream_t s, float* dw, float* db, int64_t C) {
  LAUNCH_KERNEL(zero_kernel, ceil_div(C, kThreads), kThreads, 0, s, dw, C);
  LAUNCH_KERNEL(zero_kernel, ceil_div(C, kThreads), kThreads, 0, s, db, C);
}
}  // namespace

void ladder_layernorm_forward_naive(const float* x, const float* w, const float* b, float* out, float* mean,
                                    float* rstd, int64_t N, int64_t C, double eps, void* stream) {
  if (N == 0 || C == 0) return;
  LAUNCH_KERNEL(layernorm_forward_naive_kernel, ceil_div(N, kThreads), kThreads, 0, as_stream(stream), x, w, b, out,
                mean, rstd, N, C, float(eps));
}

void ladder_layernorm_forward_warp(const float* x, const float* w, const float* b, float* out, float* mean, float* rstd,
                                   int64_t N, int64_t C, double eps, void* stream) {
  if (N == 0 || C == 0) return;
  LAUNCH_KERNEL(layernorm_forward_warp_kernel, ceil_div(N, kThreads / 32), kThreads, 0, as_stream(stream), x, w, b, out,
                mean, rstd, N, C, float(eps));
}

void ladder_layernorm_backward_naive(const float* dout, const float* x, const float* w, const float* mean,
                                     const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C,
                                     void* stream) {
  if (C == 0) return;
  const auto s = as_stream(stream);
  zero_dw_db(s, dw, db, C);
  if (N == 0) return;
  LAUNCH_KERNEL(layernorm_backward_naive_kernel, ceil_div(N, kThreads), kThreads, 0, s, dout, x, w, mean, rstd, dx, dw,
                db, N, C);
}

void ladder_layernorm_backward_warp(const float* dout, const float* x, const float* w, const float* mean,
                                    const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C,
                                    void* stream) {
  if (C == 0) return;
  const auto s = as_stream(stream);
  zero_dw_db(s, dw, db, C);
  if (N == 0) return;
  LAUNCH_KERNEL(layernorm_backward_warp_kernel, ceil_div(N, kThreads / 32), kThreads, 0, s, dout, x, w, mean, rstd, dx,
                dw, db, N, C);
}

}  // namespace eng::ENGINE_GPU_NS
