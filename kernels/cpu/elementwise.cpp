// Elementwise CPU kernels: add, sub, mul, scale, axpy, fill, bias add, bias
// fill (bias broadcast over rows) and the bias gradient. Memory bound: bytes = 4 * n * (inputs + outputs) for fp32,
// flops = n (one op per element; bias_backward: rows*cols adds; bias_fill
// none, 4 rows*cols bytes written).
#include <algorithm>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

// OpenMP costs a few microseconds per region, so small tensors stay serial.
constexpr int64_t kParallelMin = 1 << 15;

template <typename T>
void add(const T* a, const T* b, T* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void sub(const T* a, const T* b, T* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
}

template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

template <typename T>
void scale(const T* x, T s, T* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = s * x[i];
}

template <typename T>
void axpy(T* dst, const T* src, T alpha, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] += alpha * src[i];
}

template <typename T>
void fill(T* dst, T value, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = value;
}

template <typename T>
void bias_add(T* out, const T* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] += bias[c];
}

template <typename T>
void bias_fill(T* out, const T* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) std::copy(bias, bias + cols, out + r * cols);
}

template <typename T>
void bias_backward(const T* dout, T* db, int64_t rows, int64_t cols) {
  // Each thread owns a band of columns and walks the rows in order, so the
  // inner loop reads contiguous memory, no atomics are needed, and the sum
  // order is fixed (deterministic) whatever the thread count.
  constexpr int64_t kBand = 64;
  const int64_t bands = (cols + kBand - 1) / kBand;
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t band = 0; band < bands; ++band) {
    const int64_t c0 = band * kBand, c1 = std::min(cols, c0 + kBand);
    T acc[kBand] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = dout + r * cols;
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) db[c] = acc[c - c0];
  }
}

#define INSTANTIATE(T)                                        \
  template void add<T>(const T*, const T*, T*, int64_t);      \
  template void sub<T>(const T*, const T*, T*, int64_t);      \
  template void mul<T>(const T*, const T*, T*, int64_t);      \
  template void scale<T>(const T*, T, T*, int64_t);           \
  template void axpy<T>(T*, const T*, T, int64_t);            \
  template void fill<T>(T*, T, int64_t);                      \
  template void bias_add<T>(T*, const T*, int64_t, int64_t);  \
  template void bias_fill<T>(T*, const T*, int64_t, int64_t); \
  template void bias_backward<T>(const T*, T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
