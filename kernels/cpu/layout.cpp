// Data movement: a general permute (out[idx permuted] = x[idx]) and a
// row-block copy used by concat/split. Pure memory traffic: bytes = 8*n, flops 0.
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

template <typename T>
void permute(const T* x, T* out, const int64_t* shape, const int* dims, int ndim) {
  // out has shape (shape[dims[0]], ..., shape[dims[ndim-1]]). Walk out in
  // order and find the matching input offset from the input strides.
  int64_t in_stride[8], out_shape[8], n = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    in_stride[d] = n;
    n *= shape[d];
  }
  for (int d = 0; d < ndim; ++d) out_shape[d] = shape[dims[d]];
#pragma omp parallel for if (n > 65536)
  for (int64_t o = 0; o < n; ++o) {
    int64_t rem = o, src = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = rem % out_shape[d];
      rem /= out_shape[d];
      src += idx * in_stride[dims[d]];
    }
    out[o] = x[src];
  }
}

template <typename T>
void copy_rows(const T* src, int64_t src_stride, T* dst, int64_t dst_stride, int64_t outer, int64_t cols) {
#pragma omp parallel for if (outer * cols > 65536)
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * dst_stride, src + o * src_stride, size_t(cols) * sizeof(T));
}

#define INSTANTIATE(T)                                                     \
  template void permute<T>(const T*, T*, const int64_t*, const int*, int); \
  template void copy_rows<T>(const T*, int64_t, T*, int64_t, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(int32_t)

}  // namespace eng::cpu
