// The Llama block's kernels under the emulator against the cpu reference,
// through the engine ops, forward and backward, in f32, bf16 and f16
// (emu_check.h's tolerances): rmsnorm and add_rmsnorm (layernorm.cu's kRms
// kernels: the warp backward, the block-per-row one for wide rows, scalar
// and 128-bit loads, the residual's pending gradient added in the kernel),
// swiglu (packed gate|up, vector and scalar units) and rope_ (in place on a
// packed qkv with grouped K/V heads, at a position offset; vector and scalar
// pairs).
#include "engine/kernel_profile.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

Tol loosened(DType t, double k) { return {tol_for(t).atol * k, tol_for(t).rtol * k}; }

void check_rmsnorm(const Tensor& x0, DType t) {
  const int64_t C = x0.size(-1);
  const Tensor w0 = Tensor::randn({C}, 11, 1.f), g0 = Tensor::randn(x0.shape(), 13);
  Tensor xr = rounded(x0, t).set_requires_grad(true), wr = rounded(w0, t).set_requires_grad(true);
  Tensor ref = rmsnorm(xr, wr);
  ref.backward(rounded(g0, t));
  Tensor xe = on_emu(x0, t).set_requires_grad(true), we = on_emu(w0, t).set_requires_grad(true);
  Tensor out = rmsnorm(xe, we);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == t);
  out.backward(on_emu(g0, t));
  const Tol tol = tol_for(t);
  CHECK_CLOSE(values(out.to(kCPU)), values(ref), tol.atol, tol.rtol);
  CHECK_CLOSE(values(xe.grad().to(kCPU)), values(xr.grad()), tol.atol, tol.rtol);
  CHECK_CLOSE(values(we.grad().to(kCPU)), values(wr.grad()), tol.atol, tol.rtol);
}

}  // namespace

TEST_CASE("emu rmsnorm: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t N : {1, 37})
      for (int64_t C : {1, 3, 33, 64, 100}) {
        INFO(dtype_name(t) << " N = " << N << " C = " << C);
        check_rmsnorm(Tensor::randn({N, C}, uint64_t(N * 1000 + C), 2.f), t);
      }
  // Rows too wide for the warp backward (the block-per-row kernel), and an
  // unaligned view (scalar loads).
  check_rmsnorm(Tensor::randn({5, 1100}, 8, 2.f), DType::f32);
  check_rmsnorm(Tensor::randn({5, 300}, 9, 2.f), DType::bf16);
  check_rmsnorm(Tensor::randn({6, 5}, 6).slice(1, 6), DType::f32);
  // The Llama's C = 2048 (eight 16-bit packs a lane in the staged forward)
  // over 37 rows, a second turn of the emulator's 32 warps; f32 at 1024.
  check_rmsnorm(Tensor::randn({37, 2048}, 10, 2.f), DType::bf16);
  check_rmsnorm(Tensor::randn({37, 1024}, 11, 2.f), DType::f32);
}

TEST_CASE("emu add_rmsnorm: the fused residual forward, and the residual's gradient added in the backward kernel",
          "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t C : {5, 64}) {
      INFO(dtype_name(t) << " C = " << C);
      const int64_t N = 37;
      const Tensor x0 = Tensor::randn({N, C}, 21), r0 = Tensor::randn({N, C}, 22), w0 = Tensor::randn({C}, 23);
      const Tensor w20 = Tensor::randn({C}, 25), g0 = Tensor::randn({N, C}, 26);
      // Two in a row, as two blocks: the first's sum gets its gradient from
      // the second's sum (the residual stream) and from its own rmsnorm.
      auto run = [&](auto&& make, const Tensor& g, std::vector<Tensor>& leaves, KernelProfile* prof) {
        leaves = {make(x0), make(r0), make(w0), make(w20)};
        for (Tensor& l : leaves) l.set_requires_grad(true);
        const auto [sum, normed] = add_rmsnorm(leaves[0], leaves[1], leaves[2]);
        const auto [sum2, normed2] = add_rmsnorm(sum, normed, leaves[3]);
        if (prof) prof->start();
        add(sum2, normed2).backward(g);
        if (prof) prof->stop();
        return std::vector<Tensor>{sum, normed, sum2, normed2};
      };
      std::vector<Tensor> lr, le;
      const std::vector<Tensor> ref = run([&](const Tensor& v) { return rounded(v, t); }, rounded(g0, t), lr, nullptr);
      KernelProfile prof(kEmu);
      const std::vector<Tensor> got = run([&](const Tensor& v) { return on_emu(v, t); }, on_emu(g0, t), le, &prof);
      int fused = 0;
      for (const KernelCall& c : prof.calls()) {
        CHECK(c.name != "axpy_inplace");
        fused += c.name == "fused_residual_rmsnorm_backward";
      }
      CHECK(fused == 2);
      // The emu sums round to t and the next norm sees them: 16-bit types at
      // twice the tolerance forward, four times for the gradients.
      const double k = t == DType::f32 ? 1.0 : 2.0;
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("output " << i);
        const Tol tol = loosened(t, k);
        CHECK_CLOSE(values(got[i].to(kCPU)), values(i % 2 == 0 ? ref[i].to(t).to(DType::f32) : ref[i]), tol.atol,
                    tol.rtol);
      }
      for (size_t i = 0; i < lr.size(); ++i) {
        INFO("grad of leaf " << i);
        const Tol tol = loosened(t, 2 * k);
        CHECK_CLOSE(values(le[i].grad().to(kCPU)), values(lr[i].grad()), tol.atol, tol.rtol);
      }
    }
}

TEST_CASE("emu swiglu: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t H : {1, 5, 16, 40}) {  // 16, 40: whole 16-byte packs in every dtype's units
      INFO(dtype_name(t) << " H = " << H);
      const Tensor gu0 = Tensor::randn({7, 2 * H}, uint64_t(H), 2.f), g0 = Tensor::randn({7, H}, 3);
      Tensor gr = rounded(gu0, t).set_requires_grad(true), ge = on_emu(gu0, t).set_requires_grad(true);
      const Tensor ref = swiglu(gr), out = swiglu(ge);
      ref.backward(rounded(g0, t));
      out.backward(on_emu(g0, t));
      CHECK(out.device() == kEmu);
      CHECK_EMU_CLOSE(out, ref, t);
      CHECK_EMU_CLOSE(ge.grad(), gr.grad(), t);
    }
}

TEST_CASE("emu rope_: a packed qkv's q and k heads turned in place, the gradient turned back", "[emu][kernels]") {
  // HS 16 (8 pairs: whole bf16 packs, two f32 ones) and HS 6 (scalar pairs);
  // 3 query heads sharing one K/V head; positions from 5 of a 40-row table.
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t HS : {6, 16}) {
      INFO(dtype_name(t) << " HS = " << HS);
      const int64_t B = 2, T = 9, NH = 3, NKV = 1, W = (NH + 2 * NKV) * HS, off = 5;
      RopeOptions o;
      o.theta = 500000, o.factor = 8, o.original_max_positions = 16;
      const Tensor tc = rope_table(40, HS, o, kCPU), te = tc.to(kEmu);
      const Tensor x0 = Tensor::randn({B, T, W}, uint64_t(HS)), g0 = Tensor::randn({B, T, W}, 7);
      Tensor xr = rounded(x0, t).set_requires_grad(true), xe = on_emu(x0, t).set_requires_grad(true);
      const Tensor ref = rope_(scale(xr, 1.0), tc, NH + NKV, off);
      Tensor in = scale(xe, 1.0);
      const Tensor out = rope_(in, te, NH + NKV, off);
      CHECK(out.data_ptr() == in.data_ptr());
      ref.backward(rounded(g0, t));
      out.backward(on_emu(g0, t));
      CHECK_EMU_CLOSE(out, ref, t);
      CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
    }
}
