// Tests that grade some of docs/exercises.md: each checks a property of the
// shipped code that no other test pins down, so the bug an exercise plants
// there would pass every other test. They pass on the shipped code and run
// with the rest of the suite (they are regression tests too). Each name
// starts with its exercise's number and holds neither "layernorm" nor
// "softmax", so the exercises' specs ("*layernorm*") do not pick them up.
// Run them with:
//   ./build/tests/engine_tests "[exercise]"
//   ./build/tests/engine_tests "exercise 3*"     (one of them)
#include <utility>
#include <vector>

#include "engine/optim/loss_scaler.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/ladder.h"
#include "tests/kernels/emu_check.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::test;

// Exercise 3: the max a softmax subtracts is there for range only. The
// regular tests of the GPU kernels draw logits of std 5 (|x| < ~25, exp(25)
// ~ 7e10, far from float's 3.4e38 = exp(88.7)), so a kernel that forgets it
// still passes them. Logits of 100 +- 6 overflow exp() without it: inf / inf
// gives NaN, which the comparison catches. The cpu reference
// (kernels/cpu/softmax.cpp) subtracts it; the shipped kernel
// (kernels/cuda/softmax.cu, through the engine op) and the ladder's naive
// rung (kernels/cuda/ladder_softmax.cu) are checked against it, causal and
// not; the shipped one also backward, in f32, bf16 and f16 (emu_check.h's
// tolerances: the inputs are rounded to the storage type on both sides).
TEST_CASE("exercise 3: logits near 100 give the cpu reference's probabilities", "[exercise][emu]") {
  const int64_t T = 33, rows = 3 * T;  // three (T, T) blocks; T not a multiple of a warp
  const Tensor x0 = add(Tensor::randn({3, T, T}, 101, 2.f), Tensor::full({3, T, T}, 100.f));
  const Tensor g0 = Tensor::randn({3, T, T}, 102);
  for (Causal causal : {Causal::no, Causal::yes})
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      INFO("engine op softmax, " << dtype_name(t) << (causal == Causal::yes ? ", causal" : ""));
      Tensor xr = rounded(x0, t).set_requires_grad(true);
      Tensor ref = softmax(xr, causal);
      ref.backward(rounded(g0, t));
      Tensor xe = on_emu(x0, t).set_requires_grad(true);
      Tensor out = softmax(xe, causal);
      out.backward(on_emu(g0, t));
      CHECK_EMU_CLOSE(out, ref, t);
      CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
    }
  for (bool causal : {false, true}) {
    INFO("ladder_softmax_forward_naive" << (causal ? ", causal" : ""));
    const Tensor x = x0.reshape({rows, T});
    const Tensor y = Tensor::empty({rows, T}, DType::f32, kCPU);
    cpu::softmax_forward(x.data<float>(), y.data<float>(), rows, T, causal);
    const Tensor xe = x.to(kEmu), ye = Tensor::empty({rows, T}, DType::f32, kEmu);
    ENGINE_GPU_CALL(kEmu, ladder_softmax_forward_naive, xe.data<float>(), ye.data<float>(), rows, T, causal, nullptr);
    CHECK_CLOSE(values(ye.to(kCPU)), values(y), 1e-5, 1e-5);
  }
}

// Exercise 2: the fused residual add + layernorm (add_layernorm,
// fused_residual_layernorm_forward_kernel in kernels/cuda/layernorm.cu) has
// its own statistics code, and the regular test of it draws inputs of mean 0,
// where a one-pass variance E[x^2] - E[x]^2 is as good as the two-pass one.
// Here the sum x + r has mean 30 and spread 0.5, as in the plain layernorm's
// "3-d input, large mean" test: the one-pass variance loses about 3 of
// float's 7 digits (an error of ~5e-4 in the output), the two-pass one
// agrees with the cpu to ~1e-6. Checked at 10x the f32 tolerance (1e-4), as
// that test does: both sides sum in fp32 in different orders, and an ulp of
// 30 is 4e-6 of the spread.
TEST_CASE("exercise 2: the fused residual add and norm with a large mean match the cpu", "[exercise][emu]") {
  const Shape s{2, 3, 40};
  const Tensor x0 = add(Tensor::randn(s, 111, 0.35f), Tensor::full(s, 15.f));
  const Tensor r0 = add(Tensor::randn(s, 112, 0.35f), Tensor::full(s, 15.f));
  const Tensor w0 = Tensor::randn({40}, 113), b0 = Tensor::randn({40}, 114), g0 = Tensor::randn(s, 115);
  auto run = [&](auto&& make, std::vector<Tensor>& leaves) {
    leaves = {make(x0), make(r0), make(w0), make(b0)};
    for (Tensor& l : leaves) l.set_requires_grad(true);
    const auto [sum, normed] = add_layernorm(leaves[0], leaves[1], leaves[2], leaves[3]);
    normed.backward(make(g0));
    return std::vector<Tensor>{sum, normed};
  };
  std::vector<Tensor> lr, le;
  const std::vector<Tensor> ref = run([](const Tensor& v) { return v.detach().clone(); }, lr);
  const std::vector<Tensor> got = run([](const Tensor& v) { return on_emu(v, DType::f32); }, le);
  const Tol tol{10 * tol_for(DType::f32).atol, 10 * tol_for(DType::f32).rtol};
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO((i == 0 ? "sum" : "normed"));
    CHECK_CLOSE(values(got[i].to(kCPU)), values(ref[i]), tol.atol, tol.rtol);
  }
  const char* const names[] = {"x", "r", "w", "b"};
  for (size_t i = 0; i < lr.size(); ++i) {
    INFO("gradient of " << names[i]);
    CHECK_CLOSE(values(le[i].grad().to(kCPU)), values(lr[i].grad()), tol.atol, tol.rtol);
  }
}

// Exercise 6: LossScaler::step(opt) without an unscale_(opt) before it must
// divide the gradients by the scale itself (loss_scaler.h: unscale_ is
// optional). The regular tests step AdamW, whose update m / sqrt(v) is the
// same for g and S g (up to eps), or call unscale_ first, so a step() that
// forgets passes them all. SGD's step is proportional to the gradient: with
// S = 1024 it would move the parameter 1024 times too far.
TEST_CASE("exercise 6: LossScaler::step alone unscales the gradients before the step", "[exercise]") {
  Tensor p = Tensor::from_vector({1.f, -2.f, 3.f}, {3}).set_requires_grad(true);
  SGD opt({ParamGroup{{p}, 0.0, 1.0}}, 0.1);
  LossScaler scaler(LossScalerOptions{1024.0, 2.0, 0.5, 2000});
  p.set_grad(Tensor::from_vector({1024.f, -2048.f, 512.f}, {3}));  // the gradient (1, -2, 0.5), scaled by S
  CHECK(scaler.step(opt));
  CHECK_CLOSE(values(p.grad()), (std::vector<double>{1.0, -2.0, 0.5}), 0, 1e-7);  // unscaled in place
  CHECK_CLOSE(values(p), (std::vector<double>{0.9, -1.8, 2.95}), 1e-6, 1e-6);     // p - 0.1 g
  CHECK(scaler.get_scale() == 1024.0);                                            // one clean step: no growth yet
}
