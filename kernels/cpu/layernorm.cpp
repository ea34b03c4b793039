// LayerNorm over the last dim, forward and backward (llm.c's layernorm_*).
//   out = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(var + eps)
// Two-pass mean/variance in T (never in a 16-bit type).
// backward, with xhat = (x - mean) * rstd and g = dout * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum dout*xhat,  db = sum dout
// bytes: forward 4 (2NC + 2C + 2N), backward 4 (4NC + 2C + 2N) (dout, x read; dx written; dw, db
// accumulated over rows); flops ~ 8NC / 15NC (backward a row: g 1, xhat 2, the two sums 3, dx 4,
// dw and db 3, rounded up for rstd's broadcast; the CUDA kernels and the workbench count the same).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/loops.h"

namespace eng::cpu {

namespace {
// One row each, at the CPU's vector width (loops.h); the parallel loops
// below call them.
template <typename T>
ENGINE_CPU_CLONES void forward_row(const T* xr, const T* w, const T* b, T* o, T* mean, T* rstd, int64_t C, double eps) {
  T m = 0;
#pragma omp simd reduction(+ : m)
  for (int64_t c = 0; c < C; ++c) m += xr[c];
  m /= T(C);
  T v = 0;
#pragma omp simd reduction(+ : v)
  for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
  v /= T(C);
  const T s = T(1) / std::sqrt(v + T(eps));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] - m) * s * w[c] + b[c];
  *mean = m;
  *rstd = s;
}

template <typename T>
ENGINE_CPU_CLONES void backward_row(const T* dr, const T* xr, const T* w, T mr, T sr, T* dxr, int64_t C) {
  T mg = 0, mgx = 0;
#pragma omp simd reduction(+ : mg, mgx)
  for (int64_t c = 0; c < C; ++c) {
    const T xhat = (xr[c] - mr) * sr;
    const T g = dr[c] * w[c];
    mg += g;
    mgx += g * xhat;
  }
  mg /= T(C);
  mgx /= T(C);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) {
    const T xhat = (xr[c] - mr) * sr;
    dxr[c] = sr * (dr[c] * w[c] - mg - xhat * mgx);
  }
}

// dw, db over the columns c0 .. c0 + n (n <= kMaxBand), the rows in order.
template <typename T>
ENGINE_CPU_CLONES void param_grad_band(const T* dout, const T* x, const T* mean, const T* rstd, T* dw, T* db, int64_t N,
                                       int64_t C, int64_t n) {
  T sw[kMaxBand] = {}, sb[kMaxBand] = {};
  for (int64_t r = 0; r < N; ++r) {
    const T* xr = x + r * C;
    const T* dr = dout + r * C;
    const T mr = mean[r], sr = rstd[r];
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      sw[c] += dr[c] * ((xr[c] - mr) * sr);
      sb[c] += dr[c];
    }
  }
  std::copy(sw, sw + n, dw);
  std::copy(sb, sb + n, db);
}
}  // namespace

template <typename T>
void layernorm_forward(const T* x, const T* w, const T* b, T* out, T* mean, T* rstd, int64_t N, int64_t C, double eps) {
#pragma omp parallel for if (N * C > 16384)
  for (int64_t r = 0; r < N; ++r) forward_row(x + r * C, w, b, out + r * C, mean + r, rstd + r, C, eps);
}

template <typename T>
void layernorm_backward(const T* dout, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw, T* db,
                        int64_t N, int64_t C) {
  // dx: rows are independent, parallel over rows.
#pragma omp parallel for if (N * C > 16384)
  for (int64_t r = 0; r < N; ++r) backward_row(dout + r * C, x + r * C, w, mean[r], rstd[r], dx + r * C, C);
  // dw, db: each thread owns a band of channels and walks the rows in order
  // (contiguous, vectorized across the band), so every channel's sums have
  // one fixed order whatever the thread count (deterministic); loops.h's
  // band_width.
  const int64_t width = band_width(C), bands = (C + width - 1) / width;
#pragma omp parallel for if (N * C > 16384)
  for (int64_t band = 0; band < bands; ++band) {
    const int64_t c0 = band * width;
    param_grad_band(dout + c0, x + c0, mean, rstd, dw + c0, db + c0, N, C, std::min(width, C - c0));
  }
}

#define INSTANTIATE(T)                                                                                    \
  template void layernorm_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, double); \
  template void layernorm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
