// Optimizer update loops, one pass over a parameter tensor each (fused: the
// parameter, gradient and state are read and written once).
// AdamW (decoupled weight decay, as torch.optim.AdamW):
//   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps),   bc_i = 1 - b_i^t
// bytes: 4 * n * 7 (read p, g, m, v; write p, m, v); flops ~ 15n.
// SGD (torch.optim.SGD): g += wd p; buf = mom buf + (1-damp) g (buf = g at
// the first step); g = nesterov ? g + mom buf : buf; p -= lr g.
// bytes: 4 * n * 5; flops ~ 6n.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/loops.h"

namespace eng::cpu {

namespace {
// One span of the update at the CPU's vector width (loops.h): the square root
// and division are most of its time, 16 lanes at a time under AVX-512.
template <typename T>
ENGINE_CPU_CLONES void adamw_span(T* p, const T* g, T* m, T* v, int64_t n, T decay, T b1, T b2, T step, T sqrt_bc2,
                                  T e) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    m[i] = b1 * m[i] + (T(1) - b1) * gi;
    v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    p[i] = p[i] * decay - step * m[i] / (std::sqrt(v[i]) / sqrt_bc2 + e);
  }
}

template <typename T>
ENGINE_CPU_CLONES double sum_squares_span(const T* x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}
}  // namespace

template <typename T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, double lr, double beta1, double beta2, double eps,
                double weight_decay, double bias_correction1, double bias_correction2) {
  const T decay = T(1.0 - lr * weight_decay), b1 = T(beta1), b2 = T(beta2);
  const T step = T(lr / bias_correction1), sqrt_bc2 = T(std::sqrt(bias_correction2)), e = T(eps);
  parallel_spans(n, 32768, [&](int64_t lo, int64_t hi) {
    adamw_span(p + lo, g + lo, m + lo, v + lo, hi - lo, decay, b1, b2, step, sqrt_bc2, e);
  });
}

template <typename T>
void sgd_step(T* p, const T* g, T* buf, int64_t n, double lr, double momentum, double dampening, double weight_decay,
              bool nesterov, bool first_step) {
  const T mom = T(momentum), damp = T(1.0 - dampening), wd = T(weight_decay), l = T(lr);
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i] + wd * p[i];
    if (mom != T(0)) {
      buf[i] = first_step ? gi : mom * buf[i] + damp * gi;
      gi = nesterov ? gi + mom * buf[i] : buf[i];
    }
    p[i] -= l * gi;
  }
}

template <typename T>
double sum_squares(const T* x, int64_t n) {
  return parallel_span_sum(n, 65536, [&](int64_t lo, int64_t hi) { return sum_squares_span(x + lo, hi - lo); });
}

#define INSTANTIATE(T)                                                                                                \
  template void adamw_step<T>(T*, const T*, T*, T*, int64_t, double, double, double, double, double, double, double); \
  template void sgd_step<T>(T*, const T*, T*, int64_t, double, double, double, double, bool, bool);                   \
  template double sum_squares<T>(const T*, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
