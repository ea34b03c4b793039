// Helpers for the row-wise kernels (layernorm.cu, softmax.cu): a row of C
// elements is owned by one warp (or one block), which sums over it with
// shuffles. Rows are read in chunks of V elements per lane: V = 16 / sizeof(T)
// (one 128-bit load) when every row starts 16-byte aligned and C % V == 0,
// else V = 1 (scalar loads). The launchers pick V once per launch, so kernels
// have no per-element alignment branches.
#pragma once
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {
namespace rowwise {

constexpr unsigned kFullMask = 0xffffffffu;

// Sum over the 32 lanes of a warp; every lane gets the total. All 32 lanes
// must call it (blocks are whole warps).
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

// V elements at p (V = 1, or a whole 16-byte pack) as floats.
template <int V, typename T>
__device__ __forceinline__ void load_vec(const T* p, float* v) {
  if constexpr (V == 1) {
    v[0] = to_f32(*p);
  } else {
    static_assert(V == Pack128<T>::size, "V is 1 or a 16-byte pack");
    const Pack128<T> pk = load128(p);
    for (int k = 0; k < V; ++k) v[k] = to_f32(pk.v[k]);
  }
}
template <int V, typename T>
__device__ __forceinline__ void store_vec(T* p, const float* v) {
  if constexpr (V == 1) {
    *p = from_f32<T>(v[0]);
  } else {
    static_assert(V == Pack128<T>::size, "V is 1 or a 16-byte pack");
    Pack128<T> pk;
    for (int k = 0; k < V; ++k) pk.v[k] = from_f32<T>(v[k]);
    store128(p, pk);
  }
}

// V elements of T as stored (V = 1, or a 16-byte pack): a load kept in
// registers before it is converted, at half the registers of floats for
// 16-bit T, so a kernel can have many in flight (layernorm's backward).
template <int V, typename T>
struct alignas(V * sizeof(T)) RawVec {
  T v[V];
};
template <int V, typename T>
__device__ __forceinline__ RawVec<V, T> load_raw(const T* p) {
  return load_wide<RawVec<V, T>>(p);
}

// Whether rows of C elements of T, at these bases, may use 128-bit loads.
template <typename T>
inline bool rows_vectorizable(int64_t C, const void* a, const void* b = nullptr, const void* c = nullptr) {
  return C % Pack128<T>::size == 0 && aligned16(a, b, c);
}

}  // namespace rowwise
}  // namespace eng::ENGINE_GPU_NS
