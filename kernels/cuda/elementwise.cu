// Elementwise arithmetic: add, sub, mul, scale, axpy (dst += alpha*src) and
// fill, in f32/bf16/f16 storage with fp32 math. Reference:
// kernels/cpu/elementwise.cpp. Each op is a small functor run by the shared
// unary/binary kernel templates of elementwise.cuh (which GELU uses too).
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise.h"

namespace eng::ENGINE_GPU_NS {

namespace {
struct AddOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a * b; }
};
struct AxpyOp {  // a = dst, b = src
  float alpha;
  __device__ __forceinline__ float operator()(float a, float b) const { return a + alpha * b; }
};
struct ScaleOp {
  float s;
  __device__ __forceinline__ float operator()(float x) const { return s * x; }
};
}  // namespace

// dst[i] = value, i < n: stores only (the value is rounded to T once).
// Launch and preconditions as binary_kernel. bytes = n sizeof(T); flops = 0.
template <typename T, bool kVec>
__global__ void fill_kernel(T* dst, float value, int64_t n) {
  constexpr int P = Pack128<T>::size;
  const T v = from_f32<T>(value);
  Pack128<T> pv;
  for (int k = 0; k < P; ++k) pv.v[k] = v;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vec_end = kVec ? n / P * P : 0;
  for (int64_t i = tid * P; i < vec_end; i += stride * P) store128(dst + i, pv);
  for (int64_t i = vec_end + tid; i < n; i += stride) dst[i] = v;
}

// out[i] = x[i] + bias[i % cols], i < rows cols: one element per thread step
// (the bias row stays in cache). Launch: grid-stride, 256 threads,
// grid_for(rows cols). out may alias x.
// bytes = 2 rows cols sizeof(T) + cols sizeof(T); flops = rows cols.
template <typename T>
__global__ void bias_add_kernel(const T* x, const T* __restrict__ bias, T* out, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = from_f32<T>(to_f32(x[i]) + to_f32(bias[i % cols]));
}

void add_forward(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream) {
  launch_binary(st, a, b, out, n, stream, AddOp{});
}
void sub_forward(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream) {
  launch_binary(st, a, b, out, n, stream, SubOp{});
}
void mul_forward(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream) {
  launch_binary(st, a, b, out, n, stream, MulOp{});
}
void scale_forward(gpu::Storage st, const void* x, float s, void* out, int64_t n, void* stream) {
  launch_unary(st, x, out, n, stream, ScaleOp{s});
}
void axpy_inplace(gpu::Storage st, void* dst, const void* src, float alpha, int64_t n, void* stream) {
  launch_binary(st, dst, src, dst, n, stream, AxpyOp{alpha});
}
void fill_inplace(gpu::Storage st, void* dst, float value, int64_t n, void* stream) {
  if (n == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    T* pd = static_cast<T*>(dst);
    const unsigned grid = grid_for(n / Pack128<T>::size + 1, 256);
    if (aligned16(dst))
      LAUNCH_KERNEL(fill_kernel<T, true>, grid, 256, 0, as_stream(stream), pd, value, n);
    else
      LAUNCH_KERNEL(fill_kernel<T, false>, grid, 256, 0, as_stream(stream), pd, value, n);
  });
}

void bias_add_forward(gpu::Storage st, const void* x, const void* bias, void* out, int64_t rows, int64_t cols,
                      void* stream) {
  if (rows == 0 || cols == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(bias_add_kernel<T>, grid_for(rows * cols, 256), 256, 0, as_stream(stream), static_cast<const T*>(x),
                  static_cast<const T*>(bias), static_cast<T*>(out), rows, cols);
  });
}

}  // namespace eng::ENGINE_GPU_NS
