// DType names and sizes, and IEEE binary16 conversion done bit by bit so the
// CPU build needs no compiler support for _Float16.
#include "base/dtype.h"

#include "base/error.h"

namespace eng {

void throw_error(const char* file, int line, const std::string& msg) { throw Error(cat(file, ":", line, ": ", msg)); }

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
    case DType::f16:
    case DType::u16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::i32:
      return "i32";
    case DType::u16:
      return "u16";
    case DType::u8:
      return "u8";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::u16, DType::u8})
    if (name == dtype_name(t)) return t;
  ENGINE_FAIL("unknown dtype '", name, "' (expected f32, f64, bf16, f16, i32, u16 or u8)");
}

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow (after rounding) -> inf
  if (absx < 0x38800000u) {                                  // subnormal or zero in f16
    if (absx < 0x33000000u) return uint16_t(sign);           // below half the smallest subnormal
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    // value = mant * 2^(exp-150) and the f16 subnormal unit is 2^-24, so the
    // f16 mantissa is mant >> (126 - exp), rounded to nearest even.
    const uint32_t rshift = 126u - (absx >> 23);
    uint32_t q = mant >> rshift;
    const uint32_t rem = mant & ((1u << rshift) - 1u);
    const uint32_t half = 1u << (rshift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15 (<<23 terms)
  r += 0x0fffu + ((r >> 13) & 1u);  // round to nearest even on the 13 dropped bits
  return uint16_t(sign | (r >> 13));
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {  // inf, or a NaN made quiet (payload kept), as IEEE conversions and the GPU's cvt return it
    out = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);
  } else if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // normalise the subnormal
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while (!(mant & 0x400u));
      out = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace eng
