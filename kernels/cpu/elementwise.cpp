// Elementwise CPU kernels: add, sub, mul, scale, axpy, fill, bias add, bias
// fill (bias broadcast over rows) and the bias gradient. Memory bound:
// bytes = 4 * n * (inputs + outputs) for fp32, flops = n (one op per
// element); bias_fill 4 rows*cols bytes written, no flops; bias_backward
// 4 rows*cols read, rows*cols flops.
#include <algorithm>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/loops.h"

namespace eng::cpu {

// OpenMP costs a few microseconds per region, so small tensors stay serial.
constexpr int64_t kParallelMin = 1 << 15;

namespace {
// One span of an elementwise loop, at the CPU's vector width (loops.h).
template <typename T, typename Op>
ENGINE_CPU_CLONES void binary_span(const T* a, const T* b, T* out, int64_t n, Op op) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
}
template <typename T, typename Op>
void binary(const T* a, const T* b, T* out, int64_t n, Op op) {
  parallel_spans(n, kParallelMin, [&](int64_t lo, int64_t hi) { binary_span(a + lo, b + lo, out + lo, hi - lo, op); });
}
}  // namespace

template <typename T>
void add(const T* a, const T* b, T* out, int64_t n) {
  binary(a, b, out, n, [](T x, T y) { return x + y; });
}

template <typename T>
void sub(const T* a, const T* b, T* out, int64_t n) {
  binary(a, b, out, n, [](T x, T y) { return x - y; });
}

template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n) {
  binary(a, b, out, n, [](T x, T y) { return x * y; });
}

template <typename T>
void scale(const T* x, T s, T* out, int64_t n) {
  binary(x, x, out, n, [s](T v, T) { return s * v; });
}

template <typename T>
void axpy(T* dst, const T* src, T alpha, int64_t n) {
  binary(static_cast<const T*>(dst), src, dst, n, [alpha](T d, T v) { return d + alpha * v; });
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

namespace {
// Column sums of dout[:, c0:c0 + n] (n <= kMaxBand), the rows in order.
template <typename T>
ENGINE_CPU_CLONES void column_sums(const T* dout, T* db, int64_t rows, int64_t cols, int64_t n) {
  T acc[kMaxBand] = {};
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = dout + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) acc[c] += row[c];
  }
  std::copy(acc, acc + n, db);
}
}  // namespace

template <typename T>
void bias_backward(const T* dout, T* db, int64_t rows, int64_t cols) {
  // Bands of columns (loops.h): contiguous reads, no atomics, and a fixed
  // sum order (deterministic) whatever the thread count.
  const int64_t width = band_width(cols), bands = (cols + width - 1) / width;
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t band = 0; band < bands; ++band) {
    const int64_t c0 = band * width;
    column_sums(dout + c0, db + c0, rows, cols, std::min(width, cols - c0));
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
