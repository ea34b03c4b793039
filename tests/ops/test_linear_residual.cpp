// linear_residual (engine/ops/linear_residual.cpp): r + (x W^T + b) in one
// op, the GEMM adding onto r + b on the cpu. Checked by finite differences
// (double) and against linear then add, the two ops it replaces (f32,
// values and every gradient); on the emu device against the cpu's fused
// op. Each with and without a bias (a Llama block's projections have none:
// Epilogue::residual on emu/cuda). The emu test is in the kernel suite a GPU
// call runs on cuda, where the op is cuBLASLt's GEMM with the residual as C.
#include "tests/kernels/emu_check.h"
#include "tests/test_util.h"

using namespace eng;
using test::kEmu;
using test::leaf;
using Inputs = std::vector<Tensor>;

TEST_CASE("gradcheck: linear_residual", "[gradcheck]") {
  for (const Shape& s : {Shape{2, 5, 4}, Shape{7, 4}}) {
    INFO("x " << shape_str(s));
    Shape rs = s;
    rs.back() = 3;
    CHECK_GRADCHECK([](const Inputs& x) { return linear_residual(x[0], x[1], x[2], x[3]); },
                    {leaf(s, 80), leaf({3, 4}, 81), leaf({3}, 82), leaf(rs, 83)});
    CHECK_GRADCHECK([](const Inputs& x) { return linear_residual(x[0], x[1], Tensor(), x[2]); },
                    {leaf(s, 84), leaf({3, 4}, 85), leaf(rs, 86)});
  }
}

// The inputs x, W, b, r (b undefined without a bias), leaves on dev.
static std::vector<Tensor> residual_inputs(Shape x, int64_t O, bool with_bias, uint64_t seed, Device dev = kCPU) {
  Shape r = x;
  r.back() = O;
  auto leaf_on = [&](const Shape& s, uint64_t k, float std) {
    return Tensor::randn(s, seed + k, std).to(dev).detach().set_requires_grad(true);
  };
  return {leaf_on(x, 1, 1.f), leaf_on({O, x.back()}, 2, 0.2f), with_bias ? leaf_on({O}, 3, 1.f) : Tensor(),
          leaf_on(r, 4, 1.f)};
}

TEST_CASE("linear_residual equals linear then add on the cpu, values and gradients (f32)", "[ops]") {
  const int64_t B = 3, T = 37, C = 24, O = 40;
  const Tensor wl = Tensor::randn({B, T, O}, 90, 1.f);  // loss = sum(out * wl): every output counts
  for (bool with_bias : {true, false}) {
    INFO((with_bias ? "with a bias" : "without a bias"));
    const std::vector<Tensor> f = residual_inputs({B, T, C}, O, with_bias, 90),
                              u = residual_inputs({B, T, C}, O, with_bias, 90);
    const Tensor fused = linear_residual(f[0], f[1], f[2], f[3]);
    sum(mul(fused, wl)).backward();
    const Tensor unfused = add(u[3], linear(u[0], u[1], u[2]));
    sum(mul(unfused, wl)).backward();
    CHECK(fused.shape() == unfused.shape());
    CHECK_CLOSE(test::values(fused), test::values(unfused), 1e-5, 1e-5);
    for (size_t i = 0; i < f.size(); ++i) {
      if (!f[i].defined()) continue;
      INFO("gradient of input " << i);
      CHECK_CLOSE(test::values(f[i].grad()), test::values(u[i].grad()), 1e-5, 1e-5);
    }
  }
}

TEST_CASE("emu linear_residual matches the cpu's, values and gradients (f32)", "[emu][kernels]") {
  const int64_t R = 45, C = 20, O = 36;
  const Tensor wl = Tensor::randn({R, O}, 100, 1.f);  // the output's gradient
  for (bool with_bias : {true, false}) {
    INFO((with_bias ? "with a bias" : "without a bias"));
    const std::vector<Tensor> cpu_in = residual_inputs({R, C}, O, with_bias, 100),
                              emu_in = residual_inputs({R, C}, O, with_bias, 100, kEmu);
    const Tensor on_cpu = linear_residual(cpu_in[0], cpu_in[1], cpu_in[2], cpu_in[3]);
    on_cpu.backward(wl);
    const Tensor on_dev = linear_residual(emu_in[0], emu_in[1], emu_in[2], emu_in[3]);
    on_dev.backward(wl.to(kEmu));
    CHECK(on_dev.device() == kEmu);
    CHECK_CLOSE(test::values(on_dev.to(kCPU)), test::values(on_cpu), 1e-5, 1e-5);
    for (size_t i = 0; i < cpu_in.size(); ++i) {
      if (!cpu_in[i].defined()) continue;
      INFO("gradient of input " << i);
      CHECK_CLOSE(test::values(emu_in[i].grad().to(kCPU)), test::values(cpu_in[i].grad()), 1e-5, 1e-5);
    }
  }
}

TEST_CASE("linear_residual: a residual of the wrong shape is a one-line error", "[ops]") {
  CHECK_THROWS_WITH(
      linear_residual(Tensor::zeros({2, 4}), Tensor::zeros({3, 4}), Tensor::zeros({3}), Tensor::zeros({2, 4})),
      Catch::Matchers::Contains("linear_residual: residual") && Catch::Matchers::Contains("(2, 3)"));
}
