// kernels/cuda/softmax.cu under the emulator against the cpu reference
// (kernels/cpu/softmax.cpp), through the engine op softmax, forward and
// backward, in f32, bf16 and f16 with emu_check.h's tolerances. Sizes: one
// row; C = 1, 3, 5, 33, 100 (odd ones never vectorised), C = 64 (the 128-bit
// path for every dtype); 37 and 66 rows, more than the 32 rows one pass of the
// emulator's capped grid holds; causal with T = 5 and 33 (not multiples of a
// warp) and T = 16 (vectorised); inputs with std 5 so the max subtraction
// matters; and an unaligned view (the scalar path).
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

void check_softmax(const Tensor& x0, DType t, Causal causal) {
  const Tensor g0 = Tensor::randn(x0.shape(), 77);
  Tensor xr = rounded(x0, t).set_requires_grad(true);
  Tensor ref = softmax(xr, causal);
  ref.backward(rounded(g0, t));
  Tensor xe = on_emu(x0, t).set_requires_grad(true);
  Tensor out = softmax(xe, causal);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == t);
  out.backward(on_emu(g0, t));
  CHECK_EMU_CLOSE(out, ref, t);
  CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
}

}  // namespace

TEST_CASE("emu softmax: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t rows : {1, 37})
      for (int64_t C : {1, 3, 5, 33, 64, 100}) {
        INFO(dtype_name(t) << " rows = " << rows << " C = " << C);
        check_softmax(Tensor::randn({rows, C}, uint64_t(rows * 1000 + C), 5.f), t, Causal::no);
      }
}

TEST_CASE("emu softmax: causal mask matches the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t T : {5, 16, 33}) {
      INFO(dtype_name(t) << " T = " << T);
      check_softmax(Tensor::randn({2, T, T}, uint64_t(T), 5.f), t, Causal::yes);
    }
}

TEST_CASE("emu softmax: unaligned views take the scalar path", "[emu][kernels]") {
  // Row 1 of a width-5 tensor starts 20 bytes in: not 16-byte aligned.
  check_softmax(Tensor::randn({6, 5}, 3, 2.f).slice(1, 6), DType::f32, Causal::no);
  // C = 8 is a multiple of the f32 pack, but the view starts 36 bytes in.
  check_softmax(Tensor::randn({41}, 4, 2.f).slice(9, 41).reshape({4, 8}), DType::f32, Causal::no);
  // Block 1 of (3, 5, 5) starts 100 bytes in.
  check_softmax(Tensor::randn({3, 5, 5}, 5, 2.f).slice(1, 3), DType::f32, Causal::yes);
}
