// Adafactor (Shazeer and Stern 2018), as transformers.optimization.Adafactor
// computes it: the plain CPU reference of kernels/cuda/adafactor.cu.
// For a tensor of 2 or more dimensions, seen as B matrices of R x C (the
// last two dims), the second moment is factored into row and column
// averages of g^2 + eps1:
//   row = b2t row + (1 - b2t) mean_c(g^2 + eps1)      (B x R)
//   col = b2t col + (1 - b2t) mean_r(g^2 + eps1)      (B x C)
//   u   = g / sqrt((row_r / mean_r(row)) col_c)
// a vector keeps the full v = b2t v + (1 - b2t)(g^2 + eps1), u = g / sqrt(v).
// Then u /= max(1, RMS(u) / clip); u *= lr, lr = rel_lr x (scale_parameter ?
// max(eps2, RMS(p)) : 1) with RMS(p) taken before the update; with beta1,
// m = b1 m + (1 - b1) u and u = m; p -= wd lr p; p -= u.
// Sums and means are accumulated in double here (the kernel: fp32 trees).
// bytes per element: g read 4 times (rows, columns, RMS, update), p read
// twice and written once: 28 B (+ 8 B with beta1; v: + 8 B for vectors);
// flops ~ 20 per element.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

void adafactor_step(float* p, const float* grad, float* row, float* col, float* v, float* m, int64_t batch,
                    int64_t rows, int64_t cols, const AdafactorScalars& s) {
  const int64_t n = batch * rows * cols;
  const bool factored = row != nullptr;
  auto g_at = [&](int64_t i) { return s.grad_scale_on ? grad[i] * s.grad_scale : grad[i]; };
  const float b2t = s.beta2t, one_b2t = 1.f - s.beta2t;
  double pp = 0;
  for (int64_t i = 0; i < n; ++i) pp += double(p[i]) * double(p[i]);
  const float rms_p = float(std::sqrt(pp / double(n)));
  const float lr = s.scale_parameter ? std::max(s.eps2, rms_p) * s.rel_lr : s.rel_lr;
  std::vector<float> u(size_t(n), 0.f);
  if (factored) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t base = b * rows * cols;
      double rsum = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double acc = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const float g = g_at(base + r * cols + c);
          acc += double(g * g + s.eps1);
        }
        float& x = row[b * rows + r];
        x = b2t * x + one_b2t * float(acc / double(cols));
        rsum += double(x);
      }
      for (int64_t c = 0; c < cols; ++c) {
        double acc = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const float g = g_at(base + r * cols + c);
          acc += double(g * g + s.eps1);
        }
        float& x = col[b * cols + c];
        x = b2t * x + one_b2t * float(acc / double(rows));
      }
      const float row_mean = float(rsum / double(rows));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t i = base + r * cols + c;
          u[size_t(i)] =
              g_at(i) * (1.f / std::sqrt(row[b * rows + r] / row_mean)) * (1.f / std::sqrt(col[b * cols + c]));
        }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float g = g_at(i);
      v[i] = b2t * v[i] + one_b2t * (g * g + s.eps1);
      u[size_t(i)] = g * (1.f / std::sqrt(v[i]));
    }
  }
  double uu = 0;
  for (int64_t i = 0; i < n; ++i) uu += double(u[size_t(i)]) * double(u[size_t(i)]);
  const float rms_u = float(std::sqrt(uu / double(n)));
  const float denom = std::max(1.f, rms_u / s.clip);
  const float wd = s.weight_decay * lr;
  for (int64_t i = 0; i < n; ++i) {
    float ui = u[size_t(i)] / denom * lr;
    if (m) {
      m[i] = s.beta1 * m[i] + (1.f - s.beta1) * ui;
      ui = m[i];
    }
    p[i] = (p[i] - wd * p[i]) - ui;
  }
}

}  // namespace eng::cpu
