// Grouped-query attention (k and v with NKV < NH heads, Llama's) against
// the attention every other test checks: the same queries against K/V
// heads repeated to NH (narrow + concat here, whose backward sums each
// group's dK, dV). On the cpu (f64, exact to rounding) and on emu (our
// CUDA-core kernels in f32 and bf16, the tensor-core ones in bf16 at head
// size 64), separate q, k, v and one packed (B, T, (NH + 2 NKV) HS) qkv,
// causal and not, a query slice at an offset (context parallel); group
// sizes 1, 2, 4 and NH (multi-query).
#include "engine/kernel_profile.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

// x (B, T, NKV, HS) -> (B, T, NH, HS), head h a copy of head h / (NH / NKV).
Tensor repeat_kv(const Tensor& x, int64_t NH) {
  const int64_t G = NH / x.size(2);
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < NH; ++h) heads.push_back(narrow(x, 2, h / G, 1));
  return concat(heads, 2);
}

struct Case {
  int64_t B, Tq, Tk, NH, NKV, HS, q_offset;
  Causal causal;
};

// Output and gradients of attention(q, k, v) on `dev` in dtype t, against
// attention(q, repeat(k), repeat(v)) on the cpu in `ref_t` (inputs rounded to t).
void check(const Case& c, Device dev, DType t, AttentionImpl impl, DType ref_t, double k_tol) {
  INFO(dev.str() << " " << dtype_name(t) << " " << attention_impl_name(impl) << " NH " << c.NH << " NKV " << c.NKV
                 << " HS " << c.HS << " Tq " << c.Tq << " Tk " << c.Tk << " offset " << c.q_offset);
  const Tensor q0 = Tensor::randn({c.B, c.Tq, c.NH, c.HS}, 1), k0 = Tensor::randn({c.B, c.Tk, c.NKV, c.HS}, 2),
               v0 = Tensor::randn({c.B, c.Tk, c.NKV, c.HS}, 3), g0 = Tensor::randn({c.B, c.Tq, c.NH, c.HS}, 4);
  auto ref_in = [&](const Tensor& x) { return x.to(t).to(ref_t).detach().set_requires_grad(true); };
  Tensor qr = ref_in(q0), kr = ref_in(k0), vr = ref_in(v0);
  const Tensor ref = attention(qr, repeat_kv(kr, c.NH), repeat_kv(vr, c.NH), c.causal, AttentionImpl::ours, c.q_offset);
  ref.backward(g0.to(t).to(ref_t));
  auto dev_in = [&](const Tensor& x) { return x.to(t).to(dev).detach().set_requires_grad(true); };
  Tensor qe = dev_in(q0), ke = dev_in(k0), ve = dev_in(v0);
  const Tensor out = attention(qe, ke, ve, c.causal, impl, c.q_offset);
  out.backward(g0.to(t).to(dev));
  const Tol tol = tol_for(t);
  const double a = tol.atol * k_tol, r = tol.rtol * k_tol;
  CHECK_CLOSE(values(out.to(kCPU)), values(ref), a, r);
  CHECK_CLOSE(values(qe.grad().to(kCPU)), values(qr.grad()), a, r);
  CHECK_CLOSE(values(ke.grad().to(kCPU)), values(kr.grad()), a, r);
  CHECK_CLOSE(values(ve.grad().to(kCPU)), values(vr.grad()), a, r);
}

}  // namespace

TEST_CASE("grouped-query attention equals attention on repeated K/V heads (cpu, f64)", "[attention][gqa]") {
  for (int64_t NKV : {4, 2, 1})
    for (Causal causal : {Causal::yes, Causal::no}) {
      check({2, 7, 7, 4, NKV, 5, 0, causal}, kCPU, DType::f64, AttentionImpl::ours, DType::f64, 1e-7);
      check({1, 3, 9, 4, NKV, 5, 4, causal}, kCPU, DType::f64, AttentionImpl::ours, DType::f64, 1e-7);
    }
  CHECK_GRADCHECK([](const std::vector<Tensor>& x) { return attention(x[0], x[1], x[2]); },
                  {leaf({1, 4, 4, 3}, 5), leaf({1, 4, 2, 3}, 6), leaf({1, 4, 2, 3}, 7)});
}

TEST_CASE("emu grouped-query attention: the CUDA-core and tensor-core kernels", "[emu][kernels][gqa]") {
  // The CUDA-core kernels (f32, and bf16 at HS 24 which the tensor-core ones
  // refuse) at emu_check.h's tolerances x4 (D from O read back rounded, dS
  // cancelling: the CUDA-core test's factor); the tensor-core ones at x6
  // (P and dS rounded for their products, the mma test's).
  for (int64_t NKV : {4, 2, 1}) {
    check({2, 19, 19, 4, NKV, 8, 0, Causal::yes}, kEmu, DType::f32, AttentionImpl::ours, DType::f32, 4);
    check({1, 5, 21, 4, NKV, 8, 16, Causal::yes}, kEmu, DType::f32, AttentionImpl::ours, DType::f32, 4);
    check({1, 17, 17, 4, NKV, 24, 0, Causal::no}, kEmu, DType::bf16, AttentionImpl::ours, DType::f32, 4);
    check({1, 70, 70, 4, NKV, 64, 0, Causal::yes}, kEmu, DType::bf16, AttentionImpl::ours, DType::f32, 6);
  }
  check({1, 33, 33, 2, 1, 64, 0, Causal::no}, kEmu, DType::bf16, AttentionImpl::ours, DType::f32, 6);
}

TEST_CASE("emu grouped-query attention_qkv: q | k | v packed, read and written in place", "[emu][kernels][gqa]") {
  const int64_t B = 2, T = 20, NH = 4, NKV = 2;
  for (int64_t HS : {8, 64}) {
    const DType t = HS == 64 ? DType::bf16 : DType::f32;
    INFO("HS " << HS);
    const int64_t W = (NH + 2 * NKV) * HS;
    const Tensor x0 = Tensor::randn({B, T, W}, 9), g0 = Tensor::randn({B, T, NH, HS}, 10);
    Tensor xr = x0.to(t).to(DType::f32).set_requires_grad(true);
    const std::vector<Tensor> p = split(xr, {NH * HS, NKV * HS, NKV * HS}, -1);
    const Tensor ref = attention(p[0].reshape({B, T, NH, HS}), repeat_kv(p[1].reshape({B, T, NKV, HS}), NH),
                                 repeat_kv(p[2].reshape({B, T, NKV, HS}), NH));
    ref.backward(g0.to(t).to(DType::f32));
    Tensor xe = on_emu(x0, t).set_requires_grad(true);
    KernelProfile prof(kEmu);
    prof.start();
    const Tensor out = attention_qkv(xe, NH, Causal::yes, AttentionImpl::ours, NKV);
    out.backward(on_emu(g0, t));
    prof.stop();
    int mma = 0;
    for (const KernelCall& c : prof.calls()) {
      CHECK(c.name.find("copy") == std::string::npos);  // no split, no repeated K/V
      mma += c.name == "attention_forward_mma" || c.name == "attention_backward_mma";
    }
    CHECK(mma == (HS == 64 ? 2 : 0));
    const Tol tol = tol_for(t);
    const double k = HS == 64 ? 6 : 4;
    CHECK_CLOSE(values(out.to(kCPU)), values(ref), k * tol.atol, k * tol.rtol);
    CHECK_CLOSE(values(xe.grad().to(kCPU)), values(xr.grad()), k * tol.atol, k * tol.rtol);
  }
  CHECK_THROWS_WITH(
      attention_qkv(on_emu(Tensor::randn({1, 2, 24}, 1), DType::f32), 3, Causal::yes, AttentionImpl::ours, 2),
      Catch::Contains("K/V heads dividing the query heads"));
}
