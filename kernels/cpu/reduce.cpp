// Sums: along one dim of x viewed as (outer, n, inner), its adjoint (broadcast
// back), and a full sum accumulated in double so long tensors keep precision.
// bytes: 4*outer*n*inner + 4*outer*inner (fp32); flops: outer*n*inner.
#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

template <typename T>
void sum_dim(const T* x, T* out, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for if (outer * n * inner > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    T* dst = out + o * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = 0;
    for (int64_t j = 0; j < n; ++j) {
      const T* src = x + (o * n + j) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
  }
}

template <typename T>
void broadcast_dim(const T* g, T* dx, T alpha, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for if (outer * n * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < inner; ++i) dx[(o * n + j) * inner + i] = alpha * g[o * inner + i];
}

template <typename T>
double sum_all(const T* x, int64_t n) {
  double s = 0;
#pragma omp parallel for reduction(+ : s) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) s += double(x[i]);
  return s;
}

#define INSTANTIATE(T)                                                        \
  template void sum_dim<T>(const T*, T*, int64_t, int64_t, int64_t);          \
  template void broadcast_dim<T>(const T*, T*, T, int64_t, int64_t, int64_t); \
  template double sum_all<T>(const T*, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
