// kernels/cuda/cast.cu under the emulator: every conversion between f32,
// bf16 and f16 on the emu device is bit-identical to the host conversion
// (eng::float_to_bf16 / float_to_f16 and their inverses, via engine/cast.cpp),
// including NaN payloads and signs, infinities, signed zeros, f32 and f16
// subnormals, overflow to inf, and ties that round to even; every 16-bit
// pattern is tried as a source. Also on an unaligned view (scalar path).
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

Tensor f32_from_bits(const std::vector<uint32_t>& bits) {
  Tensor t = Tensor::empty({int64_t(bits.size())}, DType::f32);
  std::memcpy(t.data_ptr(), bits.data(), bits.size() * 4);
  return t;
}

// f32 inputs that exercise every branch of the 16-bit roundings.
Tensor special_f32() {
  std::vector<uint32_t> b = {
      0x00000000u, 0x80000000u,                            // +-0
      0x7f800000u, 0xff800000u,                            // +-inf
      0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u,  // NaNs: quiet, signalling, payloads
      0x7f7fffffu, 0xff7fffffu,                            // +-FLT_MAX: inf in f16, inf in bf16 (rounds up)
      0x00000001u, 0x807fffffu, 0x00400000u,               // f32 subnormals
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu,  // bf16 ties to even and near-ties
      0x3f801000u, 0x3f803000u, 0x3f801001u,               // f16 ties to even and near-ties
      0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u,  // 65504, just below/at the f16 overflow threshold
      0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u,  // smallest f16 normal, largest subnormal, 2^-24, 2^-25
      0x33000001u, 0x32ffffffu, 0x33c00000u, 0x34200000u,  // around half the smallest f16 subnormal, 1.5 and 2.5 units
      0xb3c00000u, 0x37fff000u, 0x38000000u,
  };
  for (int i = 0; i < 300; ++i) b.push_back(0x2f000000u + uint32_t(i) * 0x00171717u);  // a sweep across exponents
  Tensor t = f32_from_bits(b);
  const Tensor r = Tensor::randn({1001}, 5, 3.f);
  return concat({t, r}, 0).detach();
}

// Every 16-bit pattern, as a tensor of dtype t (bf16 or f16).
Tensor all_16bit(DType t) {
  Tensor x = Tensor::empty({65536}, t);
  uint16_t* p = static_cast<uint16_t*>(x.data_ptr());
  for (uint32_t i = 0; i < 65536; ++i) p[i] = uint16_t(i);
  return x;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(kCPU), hb = b.to(kCPU);
  return ha.dtype() == hb.dtype() && ha.nbytes() == hb.nbytes() &&
         std::memcmp(ha.data_ptr(), hb.data_ptr(), ha.nbytes()) == 0;
}

}  // namespace

TEST_CASE("emu cast: f32/bf16/f16 conversions are bit-identical to the host's", "[emu][kernels]") {
  const DType kinds[] = {DType::f32, DType::bf16, DType::f16};
  for (DType from : kinds)
    for (DType to : kinds) {
      if (from == to) continue;
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      const Tensor src = from == DType::f32 ? special_f32() : all_16bit(from);
      const Tensor ref = src.to(to);           // host: engine/cast.cpp
      const Tensor out = src.to(kEmu).to(to);  // device: cast_storage
      CHECK(out.device() == kEmu);
      CHECK(out.dtype() == to);
      CHECK(same_bytes(out, ref));
    }
}

TEST_CASE("emu cast: the host reference behaves as documented on special values", "[emu][kernels]") {
  // Pins down what "bit-identical" means above, so a change of the host
  // conversion cannot silently change both sides.
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(float_to_bf16(inf) == 0x7f80);
  CHECK(float_to_f16(-inf) == 0xfc00);
  CHECK(float_to_f16(65520.f) == 0x7c00);   // overflow after rounding
  CHECK(float_to_f16(65519.f) == 0x7bff);   // 65504
  CHECK(float_to_f16(5.9604645e-8f) == 1);  // 2^-24, smallest subnormal
  CHECK(float_to_bf16(std::nanf("")) == 0x7fc0);
  const Tensor x = Tensor::from_vector({inf, -0.f, 65520.f, 1e-40f, 5.9604645e-8f}, {5});
  const Tensor h = x.to(kEmu).to(DType::f16).to(kCPU);
  const uint16_t* p = static_cast<const uint16_t*>(h.data_ptr());
  CHECK(p[0] == 0x7c00);
  CHECK(p[1] == 0x8000);
  CHECK(p[2] == 0x7c00);
  CHECK(p[3] == 0x0000);
  CHECK(p[4] == 0x0001);
}

TEST_CASE("emu cast: unaligned views and round trips", "[emu][kernels]") {
  const Tensor x = Tensor::randn({9, 3}, 31);
  const Tensor view = x.to(kEmu).slice(1, 8);  // 12 bytes in: not 16-byte aligned
  CHECK(same_bytes(view.to(DType::bf16), x.slice(1, 8).to(DType::bf16)));
  CHECK(same_bytes(view.to(DType::f16).to(DType::f32), x.slice(1, 8).to(DType::f16).to(DType::f32)));
  // to(DType) on emu records its backward: the gradient is cast back.
  Tensor leaf = x.to(kEmu).detach().set_requires_grad(true);
  Tensor y = leaf.to(DType::bf16);
  y.backward(Tensor::full({9, 3}, 0.5, DType::bf16, kEmu));
  CHECK(leaf.grad().dtype() == DType::f32);
  CHECK(values(leaf.grad()) == std::vector<double>(27, 0.5));
}
