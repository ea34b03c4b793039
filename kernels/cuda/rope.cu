// Rotary position embedding (Su et al. 2021; Hugging Face Llama's layout):
// pair i of a head is (x[i], x[i + HS/2]), turned by its position's angle:
//   out[i] = x[i] cos - x[i + HS/2] sin,   out[i + HS/2] = x[i + HS/2] cos + x[i] sin
// The backward is the same turn with -sin. Applied to the q and k heads of
// a packed qkv in place (the heads' pairs never overlap, and each pair is
// read before it is written by the one thread that owns it). Reference:
// kernels/cpu/rope.cpp.
// Launch: a 1-D grid-stride loop over units of V pairs (row, head, i..i+V-1),
// V a 16-byte pack when HS/2, ld and the pointers allow it, else 1; 256
// threads. The cos/sin table is fp32, read through the cache (T HS 4 bytes
// from DRAM, whatever B and the heads).
// bytes = 2 B T (rot + copy) HS sizeof(T) + T HS 4;  flops = 3 B T rot HS.
#include "kernels/cuda/rope.h"
#include "kernels/cuda/rowwise.cuh"

namespace eng::ENGINE_GPU_NS {
using rowwise::load_vec;
using rowwise::store_vec;

template <typename T, int V>
__global__ void rope_kernel(const T* x, T* out, const float* __restrict__ table, gpu::RopeDims d, float sign) {
  // No __restrict__ on x and out: they may be one buffer (in place).
  const int64_t half = d.HS / 2, heads = d.rot + d.copy, per_row = heads * half / V;
  const int64_t units = d.B * d.T * per_row, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    const int64_t bt = u / per_row, rest = u % per_row, h = rest / (half / V), i = rest % (half / V) * V;
    const int64_t base = bt * d.ld + h * d.HS;
    float a[V], b[V];
    load_vec<V>(x + base + i, a);
    load_vec<V>(x + base + half + i, b);
    if (h < d.rot) {
      const float* cs = table + (d.pos_offset + bt % d.T) * d.HS;
      for (int k = 0; k < V; ++k) {
        const float c = cs[i + k], s = sign * cs[half + i + k], x1 = a[k], x2 = b[k];
        a[k] = x1 * c - x2 * s;
        b[k] = x2 * c + x1 * s;
      }
    }
    store_vec<V>(out + base + i, a);
    store_vec<V>(out + base + half + i, b);
  }
}

void rope_apply(gpu::Storage st, const void* x, void* out, const float* table, const gpu::RopeDims& d, int direction,
                void* stream) {
  ENGINE_CHECK(d.HS % 2 == 0 && d.HS > 0, "rope_apply: head size ", d.HS, " must be even");
  ENGINE_CHECK(x != out || d.copy == 0, "rope_apply: in place copies nothing (copy ", d.copy, ")");
  const int64_t half = d.HS / 2, units = d.B * d.T * (d.rot + d.copy) * half;
  if (units == 0) return;
  const float sign = direction > 0 ? 1.f : -1.f;
  dispatch_storage(st, [&]<typename T>() {
    constexpr int P = Pack128<T>::size;
    const T* px = static_cast<const T*>(x);
    T* po = static_cast<T*>(out);
    if (half % P == 0 && d.ld % P == 0 && aligned16(x, out))
      LAUNCH_KERNEL((rope_kernel<T, P>), grid_for(units / P, 256), 256, 0, as_stream(stream), px, po, table, d, sign);
    else
      LAUNCH_KERNEL((rope_kernel<T, 1>), grid_for(units, 256), 256, 0, as_stream(stream), px, po, table, d, sign);
  });
}

}  // namespace eng::ENGINE_GPU_NS
