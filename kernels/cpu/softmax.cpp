// Softmax over the last dim, with an optional causal mask, and its backward.
//   y_j = exp(x_j - max) / sum_k exp(x_k - max)   (max subtracted for range)
//   dx_j = y_j * (dy_j - sum_k y_k dy_k)
// With causal, row r is query i = r % C of a (C, C) block: keys j > i get y = 0.
// bytes: forward 8*rows*C, backward 12*rows*C (fp32); flops ~ 5*rows*C.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vmath.h"

namespace eng::cpu {

template <typename T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t C, bool causal) {
#pragma omp parallel for if (rows * C > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    const int64_t len = causal ? (r % C) + 1 : C;  // keys this query may see
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < len; ++j) m = xr[j] > m ? xr[j] : m;
    T s = 0;
    if constexpr (std::is_same_v<T, float>) {
      s = exp_shift_sum(xr, yr, len, m);  // libmvec's vector expf (vmath.h)
    } else {
      for (int64_t j = 0; j < len; ++j) {
        yr[j] = std::exp(xr[j] - m);
        s += yr[j];
      }
    }
    const T inv = T(1) / s;
    for (int64_t j = 0; j < len; ++j) yr[j] *= inv;
    for (int64_t j = len; j < C; ++j) yr[j] = 0;
  }
}

template <typename T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t C) {
  // Masked entries have y = 0, so they get dx = 0 without knowing the mask.
#pragma omp parallel for if (rows * C > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * C;
    const T* dyr = dy + r * C;
    T dot = 0;
    for (int64_t j = 0; j < C; ++j) dot += yr[j] * dyr[j];
    for (int64_t j = 0; j < C; ++j) dx[r * C + j] = yr[j] * (dyr[j] - dot);
  }
}

template void softmax_forward<float>(const float*, float*, int64_t, int64_t, bool);
template void softmax_forward<double>(const double*, double*, int64_t, int64_t, bool);
template void softmax_backward<float>(const float*, const float*, float*, int64_t, int64_t);
template void softmax_backward<double>(const double*, const double*, double*, int64_t, int64_t);

}  // namespace eng::cpu
