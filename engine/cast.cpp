// Element-type conversion on host memory: src -> float/double -> dst.
// Used by Tensor::to(DType) on cpu and emu. Rounding: nearest-even for the
// 16-bit floats, truncation toward zero for integers (as a C cast).
// bytes = n * (size(src) + size(dst)), flops = 0.
#include <cstdint>

#include "engine/cast.h"

namespace eng {

static double load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f64:
      return static_cast<const double*>(p)[i];
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::f16:
      return f16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::i32:
      return static_cast<const int32_t*>(p)[i];
    case DType::u16:
      return static_cast<const uint16_t*>(p)[i];
    case DType::u8:
      return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

static void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = float(v);
      break;
    case DType::f64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = float_to_bf16(float(v));
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = float_to_f16(float(v));
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = int32_t(v);
      break;
    case DType::u16:
      static_cast<uint16_t*>(p)[i] = uint16_t(v);
      break;
    case DType::u8:
      static_cast<uint8_t*>(p)[i] = uint8_t(v);
      break;
  }
}

void cast(const void* src, DType src_t, void* dst, DType dst_t, int64_t n) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) store(dst, dst_t, i, load(src, src_t, i));
}

}  // namespace eng
