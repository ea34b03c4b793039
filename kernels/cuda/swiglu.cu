// SwiGLU (Shazeer 2020), Llama's MLP activation, on the packed gate|up
// projection: one GEMM writes [gate | up] per row, these kernels read both
// halves and write silu(gate) * up, so neither half is split out or stored
// apart. Reference: kernels/cpu/activation.cpp.
//   out   = silu(g) u,   silu(g) = g sigmoid(g) = g / (1 + e^-g)
//   dg    = dout u sigmoid(g) (1 + g (1 - sigmoid(g))),   du = dout silu(g)
// fp32 math whatever the storage. Launch: a 1-D grid-stride loop over the
// (N, H) outputs in units of V (a 16-byte pack when H % pack == 0 and the
// buffers are 16-byte aligned, else 1), 256 threads.
// bytes = 3 N H sizeof(T) forward, 5 N H sizeof(T) backward;
// flops ~ 8 N H forward, ~14 N H backward (expf counted as ~4).
#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/swiglu.h"

namespace eng::ENGINE_GPU_NS {
using rowwise::load_vec;
using rowwise::store_vec;

namespace {
__device__ __forceinline__ float sigmoid_f(float g) { return 1.f / (1.f + expf(-g)); }
}  // namespace

// Unit u covers outputs e = u V .. u V + V - 1 of row e / H (V divides H).
template <typename T, int V>
__global__ void swiglu_forward_kernel(const T* __restrict__ gu, T* __restrict__ out, int64_t N, int64_t H) {
  const int64_t units = N * H / V, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    const int64_t e = u * V, r = e / H, c = e % H;
    float g[V], up[V];
    load_vec<V>(gu + r * 2 * H + c, g);
    load_vec<V>(gu + r * 2 * H + H + c, up);
    for (int k = 0; k < V; ++k) g[k] = g[k] * sigmoid_f(g[k]) * up[k];
    store_vec<V>(out + e, g);
  }
}

template <typename T, int V>
__global__ void swiglu_backward_kernel(const T* __restrict__ gu, const T* __restrict__ dout, T* __restrict__ dgu,
                                       int64_t N, int64_t H) {
  const int64_t units = N * H / V, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    const int64_t e = u * V, r = e / H, c = e % H;
    float g[V], up[V], d[V], dg[V], du[V];
    load_vec<V>(gu + r * 2 * H + c, g);
    load_vec<V>(gu + r * 2 * H + H + c, up);
    load_vec<V>(dout + e, d);
    for (int k = 0; k < V; ++k) {
      const float s = sigmoid_f(g[k]);
      dg[k] = d[k] * up[k] * (s * (1.f + g[k] * (1.f - s)));
      du[k] = d[k] * (g[k] * s);
    }
    store_vec<V>(dgu + r * 2 * H + c, dg);
    store_vec<V>(dgu + r * 2 * H + H + c, du);
  }
}

namespace {
// Calls f.template operator()<T, V>() with V the widest unit the layout allows.
template <typename F>
void dispatch_units(gpu::Storage st, int64_t H, const void* a, const void* b, const void* c, F&& f) {
  dispatch_storage(st, [&]<typename T>() {
    if (H % Pack128<T>::size == 0 && aligned16(a, b, c))
      f.template operator()<T, Pack128<T>::size>();
    else
      f.template operator()<T, 1>();
  });
}
}  // namespace

void swiglu_forward(gpu::Storage st, const void* gu, void* out, int64_t N, int64_t H, void* stream) {
  if (N * H == 0) return;
  dispatch_units(st, H, gu, out, nullptr, [&]<typename T, int V>() {
    LAUNCH_KERNEL((swiglu_forward_kernel<T, V>), grid_for(N * H / V, 256), 256, 0, as_stream(stream),
                  static_cast<const T*>(gu), static_cast<T*>(out), N, H);
  });
}

void swiglu_backward(gpu::Storage st, const void* gu, const void* dout, void* dgu, int64_t N, int64_t H, void* stream) {
  if (N * H == 0) return;
  dispatch_units(st, H, gu, dout, dgu, [&]<typename T, int V>() {
    LAUNCH_KERNEL((swiglu_backward_kernel<T, V>), grid_for(N * H / V, 256), 256, 0, as_stream(stream),
                  static_cast<const T*>(gu), static_cast<const T*>(dout), static_cast<T*>(dgu), N, H);
  });
}

}  // namespace eng::ENGINE_GPU_NS
