// The elementwise kernel templates every pointwise op shares (elementwise.cu's
// arithmetic, activation.cu's GELU): one kernel for every binary op and one
// for every unary op, the op being a small functor of fp32 values passed by
// value. A 1-D grid-stride loop over whole 16-byte packs when every pointer
// is 16-byte aligned, then a scalar tail (or all-scalar if not).
// Outputs may alias inputs (in-place add_/scale_), so no __restrict__: each
// element is read and written by the same thread, which keeps aliasing safe.
#pragma once
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

// out[i] = op(a[i], b[i]), i < n.
// Launch: grid_for(n / pack + 1, 256) blocks of 256 threads, grid-stride
// (launch_binary / launch_unary below).
// Preconditions: kVec only if a, b and out are 16-byte aligned.
// bytes = 3 n sizeof(T); flops = n x the op's flops (add 1, axpy 2, gelu' ~30).
template <typename T, bool kVec, typename Op>
__global__ void binary_kernel(const T* a, const T* b, T* out, int64_t n, Op op) {
  constexpr int P = Pack128<T>::size;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vec_end = kVec ? n / P * P : 0;
  for (int64_t i = tid * P; i < vec_end; i += stride * P) {
    const Pack128<T> pa = load128(a + i), pb = load128(b + i);
    Pack128<T> r;
    for (int k = 0; k < P; ++k) r.v[k] = from_f32<T>(op(to_f32(pa.v[k]), to_f32(pb.v[k])));
    store128(out + i, r);
  }
  for (int64_t i = vec_end + tid; i < n; i += stride) out[i] = from_f32<T>(op(to_f32(a[i]), to_f32(b[i])));
}

// out[i] = op(x[i]), i < n.
// Launch and preconditions as binary_kernel.
// bytes = 2 n sizeof(T); flops = n x the op's flops (scale 1, gelu ~20).
template <typename T, bool kVec, typename Op>
__global__ void unary_kernel(const T* x, T* out, int64_t n, Op op) {
  constexpr int P = Pack128<T>::size;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vec_end = kVec ? n / P * P : 0;
  for (int64_t i = tid * P; i < vec_end; i += stride * P) {
    const Pack128<T> px = load128(x + i);
    Pack128<T> r;
    for (int k = 0; k < P; ++k) r.v[k] = from_f32<T>(op(to_f32(px.v[k])));
    store128(out + i, r);
  }
  for (int64_t i = vec_end + tid; i < n; i += stride) out[i] = from_f32<T>(op(to_f32(x[i])));
}

template <typename Op>
void launch_binary(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream, Op op) {
  if (n == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    const unsigned grid = grid_for(n / Pack128<T>::size + 1, 256);
    if (aligned16(a, b, out))
      LAUNCH_KERNEL(binary_kernel<T, true, Op>, grid, 256, 0, as_stream(stream), pa, pb, po, n, op);
    else
      LAUNCH_KERNEL(binary_kernel<T, false, Op>, grid, 256, 0, as_stream(stream), pa, pb, po, n, op);
  });
}

template <typename Op>
void launch_unary(gpu::Storage st, const void* x, void* out, int64_t n, void* stream, Op op) {
  if (n == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    const T* px = static_cast<const T*>(x);
    T* po = static_cast<T*>(out);
    const unsigned grid = grid_for(n / Pack128<T>::size + 1, 256);
    if (aligned16(x, out))
      LAUNCH_KERNEL(unary_kernel<T, true, Op>, grid, 256, 0, as_stream(stream), px, po, n, op);
    else
      LAUNCH_KERNEL(unary_kernel<T, false, Op>, grid, 256, 0, as_stream(stream), px, po, n, op);
  });
}

}  // namespace eng::ENGINE_GPU_NS
