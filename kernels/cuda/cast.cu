// Dtype casts between f32, bf16 and f16 on the device: dst[i] = convert(src[i]).
// The conversions are written out on the bits, exactly as the host's
// base/dtype.h / dtype.cpp do them (round to nearest even; overflow to inf;
// f16 subnormals), rather than with __float2bfloat16 / __float2half. The
// results are the same for every number, but the CUDA intrinsics turn every
// NaN into the canonical 0x7fff, while the host keeps the sign and payload
// (quieted: a signalling NaN comes out quiet, in every direction). Doing it by hand makes a cast bit-identical on cpu,
// emu and cuda, so a tensor moved to the GPU, cast and moved back equals the host cast, and checkpoints do not depend
// on where a cast ran. Launch: 1-D grid-stride, 256 threads, grid_for(n / 8 + 1). Each thread converts chunks of 8
// elements (two 16-byte loads of f32 or one of 16-bit values, one or two 16-byte stores) when both pointers are 16-byte
// aligned; the tail (or everything, if unaligned) goes one element at a time. bytes = n (sizeof(src) + sizeof(dst));
// flops = 0 (a few integer ops each).
#include "kernels/cuda/cast.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
using gpu::Storage;

// The C++ type of one stored element: f32 as float, the 16-bit formats as raw bits.
template <Storage S>
struct Raw {
  using type = uint16_t;
};
template <>
struct Raw<Storage::f32> {
  using type = float;
};

__device__ __forceinline__ uint32_t bits_of(float f) { return uint32_t(__float_as_int(f)); }
__device__ __forceinline__ float float_of(uint32_t u) { return __int_as_float(int(u)); }

// Widening quiets a signalling NaN (sets the top mantissa bit), as an IEEE
// conversion does and as the host's (through double) does.
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  return float_of((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);
}

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32
    const float mag = float(mant) * 5.9604644775390625e-8f;
    return sign ? -mag : mag;
  }
  return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow (after rounding) -> inf
  if (absx < 0x38800000u) {                                  // subnormal or zero in f16
    if (absx < 0x33000000u) return uint16_t(sign);           // below half the smallest subnormal
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t rshift = 126u - (absx >> 23);
    uint32_t q = mant >> rshift;
    const uint32_t rem = mant & ((1u << rshift) - 1u);
    const uint32_t half = 1u << (rshift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0x0fffu + ((r >> 13) & 1u);  // round to nearest even on the 13 dropped bits
  return uint16_t(sign | (r >> 13));
}

template <Storage S>
__device__ __forceinline__ float load_f32(typename Raw<S>::type v) {
  if constexpr (S == Storage::f32)
    return v;
  else if constexpr (S == Storage::bf16)
    return bf16_bits_to_f32(v);
  else
    return f16_bits_to_f32(v);
}

template <Storage S>
__device__ __forceinline__ typename Raw<S>::type store_f32(float v) {
  if constexpr (S == Storage::f32)
    return v;
  else if constexpr (S == Storage::bf16)
    return f32_to_bf16_bits(v);
  else
    return f32_to_f16_bits(v);
}

// 8 elements through 16-byte accesses: two packs of f32 or one of 16-bit values.
template <typename R>
__device__ __forceinline__ void load8(const R* p, R (&v)[8]) {
  constexpr int P = Pack128<R>::size;
  for (int h = 0; h < 8 / P; ++h) {
    const Pack128<R> pk = load128(p + h * P);
    for (int k = 0; k < P; ++k) v[h * P + k] = pk.v[k];
  }
}
template <typename R>
__device__ __forceinline__ void store8(R* p, const R (&v)[8]) {
  constexpr int P = Pack128<R>::size;
  for (int h = 0; h < 8 / P; ++h) {
    Pack128<R> pk;
    for (int k = 0; k < P; ++k) pk.v[k] = v[h * P + k];
    store128(p + h * P, pk);
  }
}
}  // namespace

// dst[i] = convert(src[i]), i < n. Preconditions: kVec only if src and dst
// are 16-byte aligned; no overlap. Launch, bytes, flops: the file header.
template <Storage kSrc, Storage kDst, bool kVec>
__global__ void cast_kernel(const typename Raw<kSrc>::type* __restrict__ src,
                            typename Raw<kDst>::type* __restrict__ dst, int64_t n) {
  using S = typename Raw<kSrc>::type;
  using D = typename Raw<kDst>::type;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vec_end = kVec ? n / 8 * 8 : 0;
  for (int64_t i = tid * 8; i < vec_end; i += stride * 8) {
    S in[8];
    D out[8];
    load8(src + i, in);
    for (int k = 0; k < 8; ++k) out[k] = store_f32<kDst>(load_f32<kSrc>(in[k]));
    store8(dst + i, out);
  }
  for (int64_t i = vec_end + tid; i < n; i += stride) dst[i] = store_f32<kDst>(load_f32<kSrc>(src[i]));
}

namespace {
template <Storage kSrc, Storage kDst>
void launch_cast(const void* src, void* dst, int64_t n, void* stream) {
  using S = typename Raw<kSrc>::type;
  using D = typename Raw<kDst>::type;
  const S* ps = static_cast<const S*>(src);
  D* pd = static_cast<D*>(dst);
  const unsigned grid = grid_for(n / 8 + 1, 256);
  if (aligned16(src, dst))
    LAUNCH_KERNEL(cast_kernel<kSrc, kDst, true>, grid, 256, 0, as_stream(stream), ps, pd, n);
  else
    LAUNCH_KERNEL(cast_kernel<kSrc, kDst, false>, grid, 256, 0, as_stream(stream), ps, pd, n);
}

template <Storage kSrc>
void launch_cast_from(Storage dst_st, const void* src, void* dst, int64_t n, void* stream) {
  switch (dst_st) {
    case Storage::f32:
      launch_cast<kSrc, Storage::f32>(src, dst, n, stream);
      return;
    case Storage::bf16:
      launch_cast<kSrc, Storage::bf16>(src, dst, n, stream);
      return;
    case Storage::f16:
      launch_cast<kSrc, Storage::f16>(src, dst, n, stream);
      return;
  }
}
}  // namespace

void cast_storage(Storage src_st, const void* src, Storage dst_st, void* dst, int64_t n, void* stream) {
  if (n == 0) return;
  switch (src_st) {
    case Storage::f32:
      launch_cast_from<Storage::f32>(dst_st, src, dst, n, stream);
      return;
    case Storage::bf16:
      launch_cast_from<Storage::bf16>(dst_st, src, dst, n, stream);
      return;
    case Storage::f16:
      launch_cast_from<Storage::f16>(dst_st, src, dst, n, stream);
      return;
  }
}

}  // namespace eng::ENGINE_GPU_NS
