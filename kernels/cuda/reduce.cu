// Sums along one dimension and the mean squared error, forward and backward.
// Reference: kernels/cpu/reduce.cpp (sum_dim, broadcast_dim) and
// kernels/cpu/loss.cpp (mse_forward, mse_backward). All math in fp32 (the
// MSE's total in double), outputs written (=).
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {

// out[o, i] = alpha * sum_j x[o, j, i], x viewed as (outer, n, inner).
// Launch: grid_for(outer * inner, 256) blocks of 256, grid-stride over the
// outputs; thread t owns output t and walks its n inputs, inner apart, so a
// warp reads 32 consecutive i of one row j (coalesced when inner >= 32; when
// inner == 1, a mean over the last dim, each thread reads its own row:
// strided, and fine for the token means this serves, n <= a few thousand).
// bytes = (outer n inner + outer inner) sizeof(T); flops = outer n inner.
template <typename T>
__global__ void sum_dim_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t outer, int64_t n, int64_t inner,
                               float alpha) {
  const int64_t total = outer * inner, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t o = t / inner, i = t % inner;
    const T* p = x + o * n * inner + i;
    float s = 0.f;
    for (int64_t j = 0; j < n; ++j) s += to_f32(p[j * inner]);
    out[t] = from_f32<T>(alpha * s);
  }
}

// dx[o, j, i] = alpha * g[o, i]: the gradient of sum_dim.
// Launch: grid_for(outer * n * inner, 256) blocks of 256, grid-stride over dx.
// bytes = (outer n inner + outer inner) sizeof(T); flops = outer n inner.
template <typename T>
__global__ void broadcast_dim_kernel(const T* __restrict__ g, T* __restrict__ dx, float alpha, int64_t outer, int64_t n,
                                     int64_t inner) {
  const int64_t total = outer * n * inner, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
    const int64_t o = t / (n * inner), i = t % inner;
    dx[t] = from_f32<T>(alpha * to_f32(g[o * inner + i]));
  }
}

// *out = sum_i (pred[i] - target[i])^2 / n, summed in double in a fixed order
// (deterministic, no atomics) in two launches. Pass 1: grid_for(n, 256 * 8)
// blocks of 256 (at most kMaxGrid = gpu::kMseScratch); block b sums elements
// b * 256 + t, grid-stride, into partial[b]. The partition depends on n alone,
// so a step replays bit for bit. (One block of 256 for the whole sum, as this
// was first, reads at 5 GB/s: 34 ms for the NERSC ViT's 20.7M outputs on an H100.)
// bytes = 2 n sizeof(T) + 8 grid; flops = 3 n.
template <typename T>
__global__ void mse_partial_kernel(const T* __restrict__ pred, const T* __restrict__ target, int64_t n,
                                   double* __restrict__ partial) {
  double s = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float d = to_f32(pred[i]) - to_f32(target[i]);
    s += double(d * d);
  }
  s = gpu::block_sum<256>(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Pass 2: one block of 256 adds the `blocks` partials (thread t those at t,
// t + 256, ...) and writes the mean. bytes = 8 blocks + sizeof(T); flops = blocks.
template <typename T>
__global__ void mse_finish_kernel(const double* __restrict__ partial, int blocks, int64_t n, T* __restrict__ out) {
  double s = 0;
  for (int b = int(threadIdx.x); b < blocks; b += int(blockDim.x)) s += partial[b];
  s = gpu::block_sum<256>(s);
  if (threadIdx.x == 0) *out = from_f32<T>(n > 0 ? float(s / double(n)) : 0.f);
}

// dpred[i] = 2 (pred[i] - target[i]) * dloss / n, dloss a device scalar.
// Launch: grid_for(n, 256) blocks of 256, grid-stride.
// bytes = 3 n sizeof(T); flops = 4 n.
template <typename T>
__global__ void mse_backward_kernel(const T* __restrict__ pred, const T* __restrict__ target,
                                    const T* __restrict__ dloss, T* __restrict__ dpred, int64_t n) {
  const float k = 2.f * to_f32(*dloss) / float(n);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dpred[i] = from_f32<T>(k * (to_f32(pred[i]) - to_f32(target[i])));
}

}  // namespace

void sum_dim(gpu::Storage st, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, float alpha,
             void* stream) {
  if (outer * inner == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(sum_dim_kernel<T>, grid_for(outer * inner, 256), 256, 0, as_stream(stream), static_cast<const T*>(x),
                  static_cast<T*>(out), outer, n, inner, alpha);
  });
}

void broadcast_dim(gpu::Storage st, const void* g, void* dx, float alpha, int64_t outer, int64_t n, int64_t inner,
                   void* stream) {
  if (outer * n * inner == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(broadcast_dim_kernel<T>, grid_for(outer * n * inner, 256), 256, 0, as_stream(stream),
                  static_cast<const T*>(g), static_cast<T*>(dx), alpha, outer, n, inner);
  });
}

void mse_forward(gpu::Storage st, const void* pred, const void* target, int64_t n, double* d_scratch, void* out,
                 void* stream) {
  static_assert(kMaxGrid <= gpu::kMseScratch, "mse_forward: a partial per block must fit the scratch");
  const unsigned blocks = grid_for(n, 256 * 8);
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(mse_partial_kernel<T>, blocks, 256, 0, as_stream(stream), static_cast<const T*>(pred),
                  static_cast<const T*>(target), n, d_scratch);
    LAUNCH_KERNEL(mse_finish_kernel<T>, 1, 256, 0, as_stream(stream), static_cast<const double*>(d_scratch),
                  int(blocks), n, static_cast<T*>(out));
  });
}

void mse_backward(gpu::Storage st, const void* pred, const void* target, const void* dloss, void* dpred, int64_t n,
                  void* stream) {
  if (n == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(mse_backward_kernel<T>, grid_for(n, 256), 256, 0, as_stream(stream), static_cast<const T*>(pred),
                  static_cast<const T*>(target), static_cast<const T*>(dloss), static_cast<T*>(dpred), n);
  });
}

}  // namespace eng::ENGINE_GPU_NS
