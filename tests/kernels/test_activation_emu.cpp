// kernels/cuda/activation.cu (GELU) under the emulator against the cpu
// reference, forward and backward, in f32, bf16 and f16, on sizes that are
// not multiples of a 16-byte pack or a block, and on an unaligned view (the
// scalar path).
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("emu gelu: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {1, 7, 33, 1000, 4099}) {
      INFO(dtype_name(t) << " n = " << n);
      const Tensor x = Tensor::randn({n}, uint64_t(n), 2.f), g = Tensor::randn({n}, uint64_t(n) + 1);
      Tensor xr = rounded(x, t).set_requires_grad(true);
      Tensor ref = gelu(xr);
      ref.backward(rounded(g, t));
      Tensor xe = on_emu(x, t).set_requires_grad(true);
      Tensor out = gelu(xe);
      CHECK(out.device() == kEmu);
      CHECK(out.dtype() == t);
      out.backward(on_emu(g, t));
      CHECK_EMU_CLOSE(out, ref, t);
      CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
    }
}

TEST_CASE("emu gelu: unaligned views take the scalar path", "[emu][kernels]") {
  const Tensor x = Tensor::randn({5, 3}, 9);  // row 1 starts 12 bytes in: not 16-byte aligned
  const Tensor ref = gelu(x.slice(1, 5));
  const Tensor out = gelu(x.to(kEmu).slice(1, 5));
  CHECK_EMU_CLOSE(out, ref, DType::f32);
}
