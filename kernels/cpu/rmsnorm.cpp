// RMSNorm over the last dim (Zhang & Sennrich 2019; Llama's LlamaRMSNorm),
// forward and backward. LayerNorm without the mean and the bias:
//   out = x * rstd * w,   rstd = 1 / sqrt(mean(x^2) + eps)
// backward, with xhat = x * rstd and g = dout * w:
//   dx = rstd * (g - xhat * mean(g * xhat)),   dw = sum over rows of dout * xhat
// (layernorm's dx without its - mean(g) term). Sums in T.
// bytes: forward 4 (2NC + C + N), backward 4 (3NC + N + 2C); flops ~ 4NC / 9NC.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/loops.h"

namespace eng::cpu {

namespace {
template <typename T>
ENGINE_CPU_CLONES void forward_row(const T* xr, const T* w, T* o, T* rstd, int64_t C, double eps) {
  T q = 0;
#pragma omp simd reduction(+ : q)
  for (int64_t c = 0; c < C; ++c) q += xr[c] * xr[c];
  const T s = T(1) / std::sqrt(q / T(C) + T(eps));
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) o[c] = xr[c] * s * w[c];
  *rstd = s;
}

template <typename T>
ENGINE_CPU_CLONES void backward_row(const T* dr, const T* xr, const T* w, T sr, T* dxr, int64_t C) {
  T mgx = 0;
#pragma omp simd reduction(+ : mgx)
  for (int64_t c = 0; c < C; ++c) mgx += dr[c] * w[c] * (xr[c] * sr);
  mgx /= T(C);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c) dxr[c] = sr * (dr[c] * w[c] - (xr[c] * sr) * mgx);
}

// dw over the columns c0 .. c0 + n (n <= kMaxBand), the rows in order.
template <typename T>
ENGINE_CPU_CLONES void weight_grad_band(const T* dout, const T* x, const T* rstd, T* dw, int64_t N, int64_t C,
                                        int64_t n) {
  T sw[kMaxBand] = {};
  for (int64_t r = 0; r < N; ++r) {
    const T* xr = x + r * C;
    const T* dr = dout + r * C;
    const T sr = rstd[r];
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) sw[c] += dr[c] * (xr[c] * sr);
  }
  std::copy(sw, sw + n, dw);
}
}  // namespace

template <typename T>
void rmsnorm_forward(const T* x, const T* w, T* out, T* rstd, int64_t N, int64_t C, double eps) {
#pragma omp parallel for if (N * C > 16384)
  for (int64_t r = 0; r < N; ++r) forward_row(x + r * C, w, out + r * C, rstd + r, C, eps);
}

template <typename T>
void rmsnorm_backward(const T* dout, const T* x, const T* w, const T* rstd, T* dx, T* dw, int64_t N, int64_t C) {
#pragma omp parallel for if (N * C > 16384)
  for (int64_t r = 0; r < N; ++r) backward_row(dout + r * C, x + r * C, w, rstd[r], dx + r * C, C);
  // Bands of channels, each walking the rows in order: the same sums whatever
  // the thread count (as layernorm_backward).
  const int64_t width = band_width(C), bands = (C + width - 1) / width;
#pragma omp parallel for if (N * C > 16384)
  for (int64_t band = 0; band < bands; ++band) {
    const int64_t c0 = band * width;
    weight_grad_band(dout + c0, x + c0, rstd, dw + c0, N, C, std::min(width, C - c0));
  }
}

#define INSTANTIATE(T)                                                                    \
  template void rmsnorm_forward<T>(const T*, const T*, T*, T*, int64_t, int64_t, double); \
  template void rmsnorm_backward<T>(const T*, const T*, const T*, const T*, T*, T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
