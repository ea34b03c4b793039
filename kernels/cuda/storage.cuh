// Storage types inside kernels: loads convert to fp32, stores round from
// fp32 (round to nearest even for bf16/half), so every kernel does its math
// in fp32 whatever the tensor holds. Also the Storage -> C++ type dispatch
// the launchers use, and the common block/grid arithmetic.
#pragma once
#include <cstdint>

#include "base/error.h"
#include "kernels/cuda/gpu_ops.h"
#include "kernels/cuda/portable.cuh"

namespace eng::ENGINE_GPU_NS {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half(v);
}

// 16 bytes of T: 4 floats or 8 bf16/half. One 128-bit load or store moves a
// whole pack, the widest access a CUDA thread can issue.
template <typename T>
struct alignas(16) Pack128 {
  static constexpr int size = int(16 / sizeof(T));
  T v[16 / sizeof(T)];
};
using gpu::aligned_to;
// A wide access of N bytes at p must be N-aligned: a GPU faults
// (misaligned address) where the emulator's host CPU would read it as any
// other, so under the emulator a misaligned one traps, naming the thread.
template <int N>
__device__ __forceinline__ void check_aligned(const void* p) {
#if !defined(__CUDACC__)
  if (!aligned_to(p, N)) __trap();
#else
  (void)p;
#endif
}
// A load or store of a whole V (a pack of alignof(V) bytes) at p.
template <typename V>
__device__ __forceinline__ V load_wide(const void* p) {
  check_aligned<alignof(V)>(p);
  return *reinterpret_cast<const V*>(p);
}
template <typename V>
__device__ __forceinline__ void store_wide(void* p, const V& v) {
  check_aligned<alignof(V)>(p);
  *reinterpret_cast<V*>(p) = v;
}
template <typename T>
__device__ __forceinline__ Pack128<T> load128(const T* p) {
  return load_wide<Pack128<T>>(p);
}
template <typename T>
__device__ __forceinline__ void store128(T* p, const Pack128<T>& v) {
  store_wide(p, v);
}
// Whether every pointer is 16-byte aligned (tensor views may not be).
inline bool aligned16(const void* a, const void* b = nullptr, const void* c = nullptr) {
  return aligned_to(a, 16) && aligned_to(b, 16) && aligned_to(c, 16);
}

// Calls f.template operator()<T>() with T the C++ storage type.
template <typename F>
void dispatch_storage(gpu::Storage st, F&& f) {
  switch (st) {
    case gpu::Storage::f32:
      f.template operator()<float>();
      return;
    case gpu::Storage::bf16:
      f.template operator()<__nv_bfloat16>();
      return;
    case gpu::Storage::f16:
      f.template operator()<__half>();
      return;
  }
}

// nullptr means the current stream (gpu_ops.h: the capture stream during graph capture).
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s ? s : gpu::current_stream()); }

inline unsigned ceil_div(int64_t a, int64_t b) { return unsigned((a + b - 1) / b); }

// The most blocks a grid-stride kernel launches. On a GPU, 1024 fills an
// H100 (132 SMs) several times over. Under the emulator the cap is 4, so that
// the small shapes tests can afford still take several passes of every
// grid-stride loop ("more rows than the grid holds in one pass").
#if defined(__CUDACC__)
inline constexpr int64_t kMaxGrid = 1024;
#else
inline constexpr int64_t kMaxGrid = 4;
#endif

// The current device's streaming multiprocessors and the most shared memory
// (static and dynamic) a block may opt in to: 227 KiB on sm_90, 163 on
// sm_80. The emulator is an sm_90 of kMaxGrid SMs (its launches refuse
// more than 227 KiB, as an H100 does).
struct DeviceLimits {
  int sms;
  size_t smem_optin;
};
inline DeviceLimits device_limits() {
#if defined(__CUDACC__)
  int dev = 0, sms = 0, smem = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return {sms, size_t(smem)};
#else
  return {int(kMaxGrid), size_t(227) * 1024};
#endif
}

// Blocks for `work` items at `per_block` items per block, capped at kMaxGrid;
// kernels loop (grid-stride) over whatever one pass does not cover.
inline unsigned grid_for(int64_t work, int64_t per_block) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return unsigned(blocks < 1 ? 1 : (blocks > kMaxGrid ? kMaxGrid : blocks));
}

// The blocks of kKernel (at `threads` threads and `smem` dynamic bytes) the
// device holds at once, its occupancy times its SMs, and at most `want`: a
// grid-stride kernel given these runs in one wave, each block looping over
// its share, where kMaxGrid blocks of a short kernel run in waves whose
// last is part empty. Only for kernels whose results do not depend on the
// grid (the SM count differs between GPUs). The emulator: grid_for's cap.
template <auto kKernel>
unsigned resident_grid(int threads, size_t smem, int64_t want) {
#if defined(__CUDACC__)
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem));
  const int64_t fit = int64_t(per_sm > 0 ? per_sm : 1) * device_limits().sms;
  return grid_for(want < fit ? want : fit, 1);
#else
  (void)threads, (void)smem;
  return grid_for(want, 1);
#endif
}

}  // namespace eng::ENGINE_GPU_NS
