// CUDA's vector types for emulator builds without the CUDA toolkit headers.
// With the toolkit (the normal case, also when ENGINE_CUDA=OFF), emu.h takes
// them from its vector_types.h instead; this file only exists so that the
// emulator and every kernel without __half/__nv_bfloat16 still build on a
// machine with no toolkit at all. Layout and alignment follow vector_types.h,
// so 128-bit vector loads (float4, int4) behave the same.
#pragma once

// What crt/host_defines.h would define for GCC.
#define __align__(n) __attribute__((aligned(n)))
#define __noinline__ __attribute__((noinline))

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned int x, y;
};
struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct float3 {
  float x, y, z;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};

inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned int x, unsigned int y) { return {x, y}; }
inline uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }

// Without the toolkit's cuda_bf16.h/cuda_fp16.h (a machine with no CUDA at
// all), minimal stand-ins for the two 16-bit types and the conversions the
// kernels use, built on the engine's own bit-exact conversions, so the
// emulated kernels still build and run in every storage type.
#include "base/dtype.h"

struct __nv_bfloat16 {
  unsigned short x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : x(eng::float_to_bf16(f)) {}
  operator float() const { return eng::bf16_to_float(x); }
};
struct __half {
  unsigned short x;
  __half() = default;
  __half(float f) : x(eng::float_to_f16(f)) {}
  operator float() const { return eng::f16_to_float(x); }
};
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __half __float2half(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
