// Element types a tensor can hold, their sizes and names, and the host-side
// conversions between float and the 16-bit float formats.
// Conventions: kernels compute in fp32 (or fp64 for gradient checks) whatever
// the storage type; bf16/f16 are rounded to nearest-even on store.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace eng {

enum class DType : uint8_t { f32, f64, bf16, f16, i32, u16, u8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // "f32", "bf16", ... ; throws on unknown
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16; }

// bf16 is the top half of an IEEE float; round to nearest even, keep NaN a NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_f16(float f);  // IEEE binary16, round to nearest even
float f16_to_float(uint16_t h);

}  // namespace eng
