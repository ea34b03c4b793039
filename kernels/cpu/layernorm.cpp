// LayerNorm over the last dim, forward and backward (llm.c's layernorm_*).
//   out = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(var + eps)
// Two-pass mean/variance in T (never in a 16-bit type).
// backward, with xhat = (x - mean) * rstd and g = dout * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum dout*xhat,  db = sum dout
// bytes: forward 4*(2NC + 2C + 2N), backward 4*(3NC + ...); flops ~ 8NC / 12NC.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

template <typename T>
void layernorm_forward(const T* x, const T* w, const T* b, T* out, T* mean, T* rstd, int64_t N, int64_t C, double eps) {
#pragma omp parallel for if (N * C > 16384)
  for (int64_t r = 0; r < N; ++r) {
    const T* xr = x + r * C;
    T m = 0;
    for (int64_t c = 0; c < C; ++c) m += xr[c];
    m /= T(C);
    T v = 0;
    for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= T(C);
    const T s = T(1) / std::sqrt(v + T(eps));
    T* o = out + r * C;
    for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] - m) * s * w[c] + b[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

template <typename T>
void layernorm_backward(const T* dout, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw, T* db,
                        int64_t N, int64_t C) {
  // dx: rows are independent, parallel over rows.
#pragma omp parallel for if (N * C > 16384)
  for (int64_t r = 0; r < N; ++r) {
    const T* xr = x + r * C;
    const T* dr = dout + r * C;
    T mg = 0, mgx = 0;
    for (int64_t c = 0; c < C; ++c) {
      const T xhat = (xr[c] - mean[r]) * rstd[r];
      const T g = dr[c] * w[c];
      mg += g;
      mgx += g * xhat;
    }
    mg /= T(C);
    mgx /= T(C);
    for (int64_t c = 0; c < C; ++c) {
      const T xhat = (xr[c] - mean[r]) * rstd[r];
      dx[r * C + c] = rstd[r] * (dr[c] * w[c] - mg - xhat * mgx);
    }
  }
  // dw, db: parallel over channels so sums have a fixed order (deterministic).
#pragma omp parallel for if (N * C > 16384)
  for (int64_t c = 0; c < C; ++c) {
    T sw = 0, sb = 0;
    for (int64_t r = 0; r < N; ++r) {
      const T xhat = (x[r * C + c] - mean[r]) * rstd[r];
      sw += dout[r * C + c] * xhat;
      sb += dout[r * C + c];
    }
    dw[c] = sw;
    db[c] = sb;
  }
}

#define INSTANTIATE(T)                                                                                    \
  template void layernorm_forward<T>(const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, double); \
  template void layernorm_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
