// Softmax over the last dim with an optional causal mask, and its backward.
// Reference: kernels/cpu/softmax.cpp; walk-through: docs/kernels/softmax.md.
//   y_j  = exp(x_j - max) / sum_k exp(x_k - max)   over the keys j the row sees
//   dx_j = y_j * (dy_j - sum_k y_k dy_k)
// Causal: row r is query i = r % C of a (C, C) block and sees keys j <= i;
// masked entries get y = 0, so the backward needs no mask (their dx is 0).
// Storage T (f32/bf16/f16), fp32 math; y and dx are written (=).
#include <climits>
#include <cmath>

#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/softmax.h"

namespace eng::ENGINE_GPU_NS {
using rowwise::load_vec;
using rowwise::store_vec;
using rowwise::warp_sum;

namespace {
constexpr int kWarpsPerBlock = 8;  // 8 rows per block, one per warp

// Online softmax (Milakov & Gimelshein 2018): a running max m and the sum s
// of exp(x - m), rescaled whenever m grows, so max and sum take one sweep.
// m = -inf means "nothing yet" (s = 0); the guards keep exp(-inf - -inf) =
// NaN out.
__device__ __forceinline__ void online_add(float& m, float& s, float v) {
  if (v > m) {
    s = (m == -INFINITY ? 0.f : s * expf(m - v)) + 1.f;
    m = v;
  } else if (m != -INFINITY) {
    s += expf(v - m);
  }
}
__device__ __forceinline__ void warp_online_combine(float& m, float& s) {
  for (int off = 16; off > 0; off >>= 1) {
    const float om = __shfl_xor_sync(rowwise::kFullMask, m, off);
    const float os = __shfl_xor_sync(rowwise::kFullMask, s, off);
    const float nm = fmaxf(m, om);
    // a + b == b + a in IEEE, so both partners of each butterfly step agree.
    s = (m == -INFINITY ? 0.f : s * expf(m - nm)) + (om == -INFINITY ? 0.f : os * expf(om - nm));
    m = nm;
  }
}
}  // namespace

// softmax_forward_kernel: one warp per row, grid-stride over rows.
// Launch: 256 threads (8 warps), grid = grid_for(rows, 8); V = 1 or a 16-byte
// pack (rowwise.cuh). Sweep 1: online max and sum over the visible keys;
// sweep 2: y = exp(x - max) / sum, 0 past the mask. The second read of x
// comes from L1/L2.
// Preconditions: C >= 1; V > 1 only if every row is 16-byte aligned.
// bytes = rows C (2 sizeof(T)) (about half the reads when causal);
// flops = ~5 rows C (exp counted as 1; the online rescale adds at most one
// more exp per element).
template <typename T, int V, bool kCausal>
__global__ void softmax_forward_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int C) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const T* xr = x + row * C;
    const int len = kCausal ? int(row % C) + 1 : C;  // keys this row sees
    float v[V];
    float m = -INFINITY, s = 0.f;
    for (int i = lane * V; i < len; i += 32 * V) {
      load_vec<V>(xr + i, v);
      for (int k = 0; k < V; ++k)
        if (!kCausal || i + k < len) online_add(m, s, v[k]);
    }
    warp_online_combine(m, s);
    const float inv = 1.f / s;
    T* yr = y + row * C;
    for (int i = lane * V; i < C; i += 32 * V) {
      if (i < len)
        load_vec<V>(xr + i, v);
      else
        for (int k = 0; k < V; ++k) v[k] = 0.f;
      for (int k = 0; k < V; ++k) v[k] = (i + k < len) ? expf(v[k] - m) * inv : 0.f;
      store_vec<V>(yr + i, v);
    }
  }
}

// softmax_backward_kernel: one warp per row, grid-stride over rows: dot =
// sum y*dy by a warp reduction, then dx = y * (dy - dot).
// Launch, preconditions: as softmax_forward_kernel (y, dy, dx rows aligned
// for V > 1). bytes = rows C (3 sizeof(T)); flops = 4 rows C.
template <typename T, int V>
__global__ void softmax_backward_kernel(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx,
                                        int64_t rows, int C) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const int64_t off = row * C;
    float yv[V], dv[V];
    float dot = 0.f;
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(y + off + i, yv);
      load_vec<V>(dy + off + i, dv);
      for (int k = 0; k < V; ++k) dot += yv[k] * dv[k];
    }
    dot = warp_sum(dot);
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(y + off + i, yv);
      load_vec<V>(dy + off + i, dv);
      for (int k = 0; k < V; ++k) yv[k] *= dv[k] - dot;
      store_vec<V>(dx + off + i, yv);
    }
  }
}

void softmax_forward(gpu::Storage st, const void* x, void* y, int64_t rows, int64_t C, gpu::SoftmaxMask mask,
                     void* stream) {
  if (rows == 0 || C == 0) return;
  ENGINE_CHECK(C <= INT_MAX, "softmax_forward: rows of ", C, " elements are too wide");
  dispatch_storage(st, [&]<typename T>() {
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    const unsigned grid = grid_for(rows, kWarpsPerBlock), block = 32 * kWarpsPerBlock;
    constexpr int P = Pack128<T>::size;
    const bool vec = rowwise::rows_vectorizable<T>(C, x, y);
    const auto s = as_stream(stream);
    if (mask == gpu::SoftmaxMask::causal) {
      if (vec)
        LAUNCH_KERNEL(softmax_forward_kernel<T, P, true>, grid, block, 0, s, px, py, rows, int(C));
      else
        LAUNCH_KERNEL(softmax_forward_kernel<T, 1, true>, grid, block, 0, s, px, py, rows, int(C));
    } else {
      if (vec)
        LAUNCH_KERNEL(softmax_forward_kernel<T, P, false>, grid, block, 0, s, px, py, rows, int(C));
      else
        LAUNCH_KERNEL(softmax_forward_kernel<T, 1, false>, grid, block, 0, s, px, py, rows, int(C));
    }
  });
}

void softmax_backward(gpu::Storage st, const void* y, const void* dy, void* dx, int64_t rows, int64_t C, void* stream) {
  if (rows == 0 || C == 0) return;
  ENGINE_CHECK(C <= INT_MAX, "softmax_backward: rows of ", C, " elements are too wide");
  dispatch_storage(st, [&]<typename T>() {
    const T* py = static_cast<const T*>(y);
    const T* pdy = static_cast<const T*>(dy);
    T* pdx = static_cast<T*>(dx);
    const unsigned grid = grid_for(rows, kWarpsPerBlock), block = 32 * kWarpsPerBlock;
    if (rowwise::rows_vectorizable<T>(C, y, dy, dx))
      LAUNCH_KERNEL(softmax_backward_kernel<T, Pack128<T>::size>, grid, block, 0, as_stream(stream), py, pdy, pdx, rows,
                    int(C));
    else
      LAUNCH_KERNEL(softmax_backward_kernel<T, 1>, grid, block, 0, as_stream(stream), py, pdy, pdx, rows, int(C));
  });
}

}  // namespace eng::ENGINE_GPU_NS
