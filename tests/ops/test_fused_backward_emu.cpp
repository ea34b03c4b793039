// The backward's fusions on emu (engine/autograd.h's takes_wide_grad and
// GradEpilogue), each against the graph that runs without it (tagged
// [kernels]: a GPU run repeats them on cuda, through cuBLASLt's epilogues):
//  - autocast's weight copies take fp32 gradients straight from the dW GEMM
//    and the layernorm kernel: no cast back to the masters, and the
//    gradients equal the cpu's (its autocast rounds as emu's kernels do);
//  - a copy with two consumers is summed in bf16 and cast once, as before
//    (only a sole contributor writes fp32);
//  - linear_gelu's GELU backward in the next GEMM's epilogue (dgelu): the
//    gradients bit for bit those of linear then gelu (whose backward is the
//    gelu_backward kernel), with no gelu_backward launch.
#include <algorithm>
#include <cmath>

#include "engine/kernel_profile.h"
#include "engine/nn/layers.h"
#include "engine/precision.h"
#include "tests/kernels/emu_check.h"
#include "tests/test_util.h"

using namespace eng;
using test::kEmu;

namespace {
int count(const KernelProfile& prof, const std::string& prefix) {
  int n = 0;
  for (const KernelCall& c : prof.calls()) n += c.name.rfind(prefix, 0) == 0;
  return n;
}
Tensor on(const Tensor& t, Device dev) { return t.to(dev).detach().set_requires_grad(true); }
}  // namespace

TEST_CASE("emu autocast: the weights' gradients reach their fp32 masters with no cast back", "[emu][kernels]") {
  // A pre-LN block's output projection: y = r + layernorm(x) W^T + b, the
  // residual added in the GEMM's epilogue on emu (linear_residual).
  const int64_t N = 37, C = 48, O = 40;
  const Tensor x0 = Tensor::randn({N, C}, 1), g0 = Tensor::randn({N, O}, 2), r0 = Tensor::randn({N, O}, 7, 2.f);
  const Tensor lw0 = Tensor::randn({C}, 3, 0.5f), lb0 = Tensor::randn({C}, 4), W0 = Tensor::randn({O, C}, 5, 0.2f),
               b0 = Tensor::randn({O}, 6);
  const Autocast ac(Precision::O2);
  auto run = [&](Device dev, KernelProfile* prof) {
    std::vector<Tensor> p{on(lw0, dev), on(lb0, dev), on(W0, dev), on(b0, dev), on(r0, dev)};
    const Tensor x = x0.to(dev);
    // The cpu's autocast rounds what emu stores in bf16: h and the gradient.
    const Tensor h = ac.cast(layernorm(ac.cast(x), ac.cast(p[0]), ac.cast(p[1])));
    const Tensor y = linear_residual(h, ac.cast(p[2]), ac.cast(p[3]), ac.cast(p[4]));
    const Tensor g = g0.to(DType::bf16).to(DType::f32).to(dev).to(dev == kCPU ? DType::f32 : DType::bf16);
    if (prof) prof->start();
    y.backward(g);
    if (prof) prof->stop();
    return p;
  };
  KernelProfile prof(kEmu);
  const std::vector<Tensor> e = run(kEmu, &prof), c = run(kCPU, nullptr);
  CHECK(count(prof, "cast_storage") == 1);                 // r's gradient only: r is no weight
  CHECK(count(prof, "gemm 40x48x37 +dbias f32out") == 1);  // dW and db of the linear, both fp32
  const test::Tol tol = test::tol_for(DType::bf16);
  for (size_t i = 0; i < e.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(e[i].grad().dtype() == DType::f32);
    CHECK_CLOSE(test::values(e[i].grad().to(kCPU)), test::values(c[i].grad()), 4 * tol.atol, 4 * tol.rtol);
  }
}

TEST_CASE("emu autocast: a weight copy with two consumers is summed in bf16 and cast back once", "[emu][kernels]") {
  const int64_t N = 21, C = 16, O = 24;
  const Tensor x1 = Tensor::randn({N, C}, 11), x2 = Tensor::randn({N, C}, 12), W0 = Tensor::randn({O, C}, 13, 0.3f);
  const Tensor g0 = Tensor::randn({N, O}, 14);
  const Autocast ac(Precision::O2);
  auto run = [&](Device dev, KernelProfile* prof) {
    const Tensor W = on(W0, dev);
    const Tensor wc = ac.cast(W);  // one cast node, read by two products
    const Tensor y = add(linear(ac.cast(x1.to(dev)), wc), linear(ac.cast(x2.to(dev)), wc));
    const Tensor g = g0.to(DType::bf16).to(DType::f32).to(dev).to(dev == kCPU ? DType::f32 : DType::bf16);
    if (prof) prof->start();
    y.backward(g);
    if (prof) prof->stop();
    return W;
  };
  KernelProfile prof(kEmu);
  const Tensor e = run(kEmu, &prof), c = run(kCPU, nullptr);
  CHECK(count(prof, "cast_storage") == 1);
  CHECK(count(prof, "gemm 24x16x21 f32out") == 0);
  const test::Tol tol = test::tol_for(DType::bf16);
  CHECK_CLOSE(test::values(e.grad().to(kCPU)), test::values(c.grad()), 4 * tol.atol, 4 * tol.rtol);
}

TEST_CASE("emu linear_gelu: GELU's backward in the next GEMM's epilogue equals linear then gelu bit for bit",
          "[emu][kernels]") {
  const int64_t N = 33, C = 24, H = 72;
  const Tensor x0 = Tensor::randn({N, C}, 21), W10 = Tensor::randn({H, C}, 22, 0.3f), b10 = Tensor::randn({H}, 23);
  const Tensor W20 = Tensor::randn({C, H}, 24, 0.2f), b20 = Tensor::randn({C}, 25), g0 = Tensor::randn({N, C}, 26);
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(dtype_name(t));
    Tensor h_fused, h_unfused;
    auto run = [&](bool fused, KernelProfile& prof) {
      std::vector<Tensor> p{on(x0.to(t), kEmu), on(W10.to(t), kEmu), on(b10.to(t), kEmu), on(W20.to(t), kEmu),
                            on(b20.to(t), kEmu)};
      const Tensor h = fused ? linear_gelu(p[0], p[1], p[2]) : gelu(linear(p[0], p[1], p[2]));
      (fused ? h_fused : h_unfused) = h.detach().to(kCPU);
      const Tensor y = linear(h, p[3], p[4]);
      prof.start();
      y.backward(g0.to(t).to(kEmu));
      prof.stop();
      return p;
    };
    KernelProfile pf(kEmu), pu(kEmu);
    const std::vector<Tensor> f = run(true, pf), u = run(false, pu);
    CHECK(count(pf, "gelu_backward") == 0);
    CHECK(count(pf, "gemm 33x72x24 +dgelu") == 1);
    CHECK(count(pu, "gelu_backward") == 1);
    const test::Tol tol = test::tol_for(t);
    // The forward: the fused GEMM's GELU output is what linear then gelu gives.
    // Bit for bit under the emulator (our GEMM rounds the pre-activation, then
    // applies GELU, as the two kernels do). Elsewhere (an ENGINE_EMU_FMA
    // build's contractions, cuBLASLt's epilogues on a GPU, which apply GELU
    // and its derivative to the fp32 product before rounding, with a fast
    // tanh) the two differ by an ulp of h, which the dW = g^T h sums carry
    // into entries that cancel to near 0: so there the worst difference is
    // held to the tolerance of the largest entry, in f32 at least 2^-10 of
    // it (cuBLASLt's GELU is not ours to the last bits). The H200 run: bf16
    // h 0.016 at 2.6, dW2 0.25 at 44; f32 8e-5 at entries about 1.
    auto same = [&](const Tensor& x, const Tensor& ref) {
      if (test::kKernelsRoundLikeCpu) {
        CHECK(test::values(x) == test::values(ref));
        return;
      }
      const std::vector<double> xv = test::values(x), rv = test::values(ref);
      REQUIRE(xv.size() == rv.size());
      double worst = 0, largest = 0;
      for (size_t i = 0; i < xv.size(); ++i)
        worst = std::max(worst, std::abs(xv[i] - rv[i])), largest = std::max(largest, std::abs(rv[i]));
      INFO("worst difference " << worst << ", largest entry " << largest);
      CHECK(worst <= 4 * (tol.atol + std::max(tol.rtol, 0x1p-10) * largest));
    };
    {
      INFO("h");
      same(h_fused, h_unfused);
    }
    for (size_t i = 0; i < f.size(); ++i) {
      INFO("input " << i);
      same(f[i].grad().to(kCPU), u[i].grad().to(kCPU));
    }
  }
}

TEST_CASE("emu autocast: a second micro-batch adds into the masters' gradients in the GEMMs and the layernorm",
          "[emu][kernels]") {
  // layernorm -> linear (weight and bias) -> a head tied to a table padded
  // from 60 to 64 rows (GPT-2's lm_head over its vocabulary padded to a
  // multiple of 64): the second backward accumulates into the masters'
  // gradients (take_master_grad: the dW GEMMs with beta 1, the layernorm's
  // reduce adding), with no add pass but the linear's bias (cuBLASLt's
  // bias-gradient epilogue writes, it cannot add). Against two fresh
  // backwards summed on the host: the same bits on emu (C + v either way).
  const int64_t N = 19, C = 32, V = 60, Vp = 64;
  const Tensor x0 = Tensor::randn({N, C}, 31), lw0 = Tensor::randn({C}, 32, 0.5f), lb0 = Tensor::randn({C}, 33);
  const Tensor W0 = Tensor::randn({C, C}, 34, 0.2f), b0 = Tensor::randn({C}, 35), E0 = Tensor::randn({V, C}, 36, 0.3f);
  const Tensor g1 = Tensor::randn({N, Vp}, 37).to(DType::bf16).to(kEmu),
               g2 = Tensor::randn({N, Vp}, 38).to(DType::bf16).to(kEmu);
  const Autocast ac(Precision::O2);
  auto forward = [&](const std::vector<Tensor>& p) {
    const Tensor h = layernorm(ac.cast(x0.to(kEmu)), ac.cast(p[0]), ac.cast(p[1]));
    return matmul(linear(h, ac.cast(p[2]), ac.cast(p[3])), ac.cast_rows(p[4], Vp), Trans::N, Trans::T);
  };
  auto leaves = [&] {
    return std::vector<Tensor>{on(lw0, kEmu), on(lb0, kEmu), on(W0, kEmu), on(b0, kEmu), on(E0, kEmu)};
  };
  const std::vector<Tensor> acc = leaves();
  forward(acc).backward(g1);
  KernelProfile prof(kEmu);
  const Tensor y2 = forward(acc);
  prof.start();
  y2.backward(g2);
  prof.stop();
  CHECK(count(prof, "axpy_inplace") == 1);  // the linear's bias
  CHECK(count(prof, "cast_storage") == 0);
  const std::vector<Tensor> a = leaves(), b = leaves();
  forward(a).backward(g1);
  forward(b).backward(g2);
  for (size_t i = 0; i < acc.size(); ++i) {
    INFO("parameter " << i);
    const Tensor want = add(a[i].grad(), b[i].grad()).to(kCPU);
    if (kEmu.type == DeviceType::emu)
      CHECK(test::values(acc[i].grad().to(kCPU)) == test::values(want));
    else  // cuBLASLt may pick another algorithm for the beta-1 product
      CHECK_CLOSE(test::values(acc[i].grad().to(kCPU)), test::values(want), 1e-5, 1e-5);
  }
}

TEST_CASE("emu autocast: a layernorm whose weight holds a gradient and whose bias does not writes both afresh",
          "[emu][kernels]") {
  // take_master_grad takes both masters' gradients or neither: the bias's
  // was dropped between two backwards, so the second writes dw and db anew
  // and autograd adds dw into the weight's (one add), db becomes the bias's.
  const int64_t N = 9, C = 32;
  const Tensor x0 = Tensor::randn({N, C}, 41), g0 = Tensor::randn({N, C}, 42).to(DType::bf16).to(kEmu);
  const Autocast ac(Precision::O2);
  const Tensor w = on(Tensor::randn({C}, 43), kEmu), b = on(Tensor::randn({C}, 44), kEmu);
  auto backward = [&](const Tensor& lw, const Tensor& lb) {
    layernorm(ac.cast(x0.to(kEmu)), ac.cast(lw), ac.cast(lb)).backward(g0);
  };
  backward(w, b);
  const std::vector<double> w1 = test::values(w.grad().to(kCPU)), b1 = test::values(b.grad().to(kCPU));
  Tensor bz = b;
  bz.zero_grad();
  backward(w, b);
  std::vector<double> w2 = w1;
  for (double& v : w2) v *= 2;  // the same gradient twice
  CHECK(test::values(w.grad().to(kCPU)) == w2);
  CHECK(test::values(b.grad().to(kCPU)) == b1);
}
