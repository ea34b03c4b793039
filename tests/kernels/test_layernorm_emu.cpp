// kernels/cuda/layernorm.cu and layernorm_backward.cu under the emulator against the cpu reference
// (kernels/cpu/layernorm.cpp), through the engine ops layernorm and
// add_layernorm, forward and backward, in f32, bf16 and f16 (emu_check.h's
// tolerances: the fp32 statistics agree with the reference's to ~1e-6, so
// the storage rounding of each output dominates). Sizes: one row; C = 1, 3,
// 5, 33, 100 (no multiple of a warp, odd ones never vectorised), C = 64 (the
// 128-bit path for every dtype); 37 rows, more than one pass of the emulator's
// capped grid (32 rows per pass of the forward and of the warp backward, 4
// of the block backward); rows too wide for the warp backward's registers
// (C = 300 scalar, 1100 in f32 packs: the block-per-row kernel); unaligned
// views (the scalar path); the residual stream's pending gradient added
// in the backward kernel (no in-place add after it); and dx's column sums
// (a linear layer's bias gradient) made by the backward kernels.
#include <cmath>

#include "engine/kernel_profile.h"
#include "kernels/cuda/layernorm.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

// layernorm on the cpu (f32, inputs rounded to t) and on emu (in t); checks
// the output and the gradients of x, w and b, at emu_check.h's tolerances
// times `loosen`.
void check_layernorm(const Tensor& x0, DType t, double loosen = 1.0) {
  const Tol tol{tol_for(t).atol * loosen, tol_for(t).rtol * loosen};
  const int64_t C = x0.size(-1);
  const Tensor w0 = Tensor::randn({C}, 11, 1.f), b0 = Tensor::randn({C}, 12, 1.f);
  const Tensor g0 = Tensor::randn(x0.shape(), 13);
  Tensor xr = rounded(x0, t).set_requires_grad(true), wr = rounded(w0, t).set_requires_grad(true),
         br = rounded(b0, t).set_requires_grad(true);
  Tensor ref = layernorm(xr, wr, br);
  ref.backward(rounded(g0, t));
  Tensor xe = on_emu(x0, t).set_requires_grad(true), we = on_emu(w0, t).set_requires_grad(true),
         be = on_emu(b0, t).set_requires_grad(true);
  Tensor out = layernorm(xe, we, be);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == t);
  out.backward(on_emu(g0, t));
  CHECK_CLOSE(values(out.to(kCPU)), values(ref), tol.atol, tol.rtol);
  CHECK_CLOSE(values(xe.grad().to(kCPU)), values(xr.grad()), tol.atol, tol.rtol);
  CHECK_CLOSE(values(we.grad().to(kCPU)), values(wr.grad()), tol.atol, tol.rtol);
  CHECK_CLOSE(values(be.grad().to(kCPU)), values(br.grad()), tol.atol, tol.rtol);
}

}  // namespace

TEST_CASE("emu layernorm: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t N : {1, 37})
      for (int64_t C : {1, 3, 5, 33, 64, 100}) {
        INFO(dtype_name(t) << " N = " << N << " C = " << C);
        check_layernorm(Tensor::randn({N, C}, uint64_t(N * 1000 + C), 2.f), t);
      }
}

TEST_CASE("emu layernorm: rows too wide for the warp backward take the block-per-row kernel", "[emu][kernels]") {
  // f32 at C = 1100 is 9 packs of 4 a lane (the warp kernel holds 8); bf16
  // at C = 300 is scalar (300 % 8 != 0), 10 elements a lane.
  check_layernorm(Tensor::randn({5, 1100}, 8, 2.f), DType::f32);
  check_layernorm(Tensor::randn({5, 300}, 9, 2.f), DType::bf16);
}

TEST_CASE("emu layernorm: the warp backward at three packs a lane, lanes past the row's end reading a clamped pack",
          "[emu][kernels]") {
  // 16-bit C = 768 (GPT-2's: 96 packs of 8, three a lane), 520 (65 packs:
  // 31 lanes past the end in the third) and 1000 (125 packs: four a lane,
  // 3 lanes past the end in the fourth), scalar C = 95 (a third element for
  // 31 lanes, lane 31 past the end); f32 C = 384 (96 packs of 4). 37 rows
  // take a pack at a time; 800 rows, 16 a warp or more of the emulator's 4
  // blocks (12 warps at three packs a lane, 8 at four), the staged kernel
  // (the row's packs loaded at once, norm_backward).
  for (int64_t N : {37, 800})
    for (DType t : {DType::bf16, DType::f16})
      for (int64_t C : {768, 520, 1000, 95}) {
        INFO(dtype_name(t) << " N = " << N << " C = " << C);
        check_layernorm(Tensor::randn({N, C}, uint64_t(N + C), 2.f), t);
      }
  // f32's tolerance is the cpu reference's own: its dw and db are sums over
  // 800 rows in series, and the kernel's by block and lane, each some 3e-5
  // off at entries near 1, not in the same direction.
  check_layernorm(Tensor::randn({800, 384}, 384, 2.f), DType::f32, 8.0);
}

// The forward loads a row's packs at once and the warp's next row before it
// reduces this one (the staged forward, up to 8 packs a lane; wider rows,
// and scalar ones, take the sweep kernel): 16-bit C = 2048 (eight packs a
// lane, the Llama's), 1800 (225 packs: only lane 0 has an eighth) and 1032
// (129: four a lane, lane 0 a fifth, in the eight-pack kernel), f32 C =
// 1024 (eight packs of 4) and 1028 (nine: the sweep kernel). 37 rows on the
// emulator's 4 blocks of 8 warps: a second turn for rows 32-36, loaded
// during the first.
TEST_CASE("emu layernorm: the forward's staged kernel, rows of up to eight packs a lane", "[emu][kernels]") {
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t C : {2048, 1800, 1032}) {
      INFO(dtype_name(t) << " C = " << C);
      check_layernorm(Tensor::randn({37, C}, uint64_t(C), 2.f), t);
    }
  for (int64_t C : {1024, 1028}) {
    INFO("f32 C = " << C);
    check_layernorm(Tensor::randn({37, C}, uint64_t(C), 2.f), DType::f32);
  }
}

TEST_CASE("emu layernorm: the residual stream's pending gradient is added in the backward kernel", "[emu][kernels]") {
  // A pre-LN residual block, h = x + layernorm(x) W: x's gradient is the
  // residual's (from h) plus the layernorm's. The residual's arrives first;
  // the layernorm's backward takes it (take_pending_grad) and adds it in its
  // kernel, so no in-place add runs, and x's gradient equals the cpu's.
  // C = 64 in bf16: one pack for 8 lanes, the other 24 past the row's end;
  // f32 at C = 384 and 800 rows: the staged kernel, three packs a lane.
  struct Case {
    DType t;
    int64_t N, C;
  };
  for (const Case& cs : {Case{DType::f32, 37, 64}, Case{DType::bf16, 37, 64}, Case{DType::f32, 800, 384}}) {
    const DType t = cs.t;
    const int64_t N = cs.N, C = cs.C;
    INFO(dtype_name(t) << " N = " << N << " C = " << C);
    const Tensor a0 = Tensor::randn({N, C}, 51), b0 = Tensor::randn({N, C}, 52), w0 = Tensor::randn({C}, 53);
    const Tensor bias0 = Tensor::randn({C}, 54), W0 = Tensor::randn({C, C}, 55, 0.2f), g0 = Tensor::randn({N, C}, 56);
    auto run = [&](auto&& make, const Tensor& g, std::vector<Tensor>& leaves, KernelProfile* prof) {
      leaves = {make(a0), make(b0), make(w0), make(bias0), make(W0)};
      for (Tensor& l : leaves) l.set_requires_grad(true);
      const Tensor x = add(leaves[0], leaves[1]);  // a node: x's gradient is summed at it
      const Tensor h = add(x, matmul(layernorm(x, leaves[2], leaves[3]), leaves[4]));
      if (prof) prof->start();
      h.backward(g);
      if (prof) prof->stop();
    };
    std::vector<Tensor> lr, le;
    // The reference in f64 from the same rounded inputs: its sums over the
    // rows are exact beside the kernel's f32 ones.
    auto ref = [&](const Tensor& v) { return rounded(v, t).to(DType::f64); };
    run(ref, ref(g0), lr, nullptr);
    KernelProfile prof(kEmu);
    run([&](const Tensor& v) { return on_emu(v, t); }, on_emu(g0, t), le, &prof);
    int fused = 0;
    for (const KernelCall& c : prof.calls()) {
      CHECK(c.name != "axpy_inplace");
      fused += c.name == "fused_residual_layernorm_backward";
    }
    CHECK(fused == 1);
    const Tol tol = tol_for(t);
    // f32 over 800 rows: dw and db are sums of terms near 4 (g W^T, W at
    // 0.2 over 384 columns) whose partial sums reach about 100 and cancel
    // to entries near 1: an f32 sum by block and lane is some 1e-4 off
    // there (cuda's grid of 100 blocks, the same on every GPU at this N,
    // 1.6e-4 from a reference in f32 in series): 16x the tolerance.
    const double k = t == DType::f32 ? (N > 64 ? 16.0 : 1.0) : 4.0;
    // x's two leaves and the layernorm's parameters (W's gradient is the
    // GEMM's, with its own bf16 tests).
    for (size_t i = 0; i < 4; ++i) {
      INFO("grad of leaf " << i);
      CHECK_CLOSE(values(le[i].grad().to(kCPU)), values(lr[i].grad()), k * tol.atol, k * tol.rtol);
    }
  }
}

TEST_CASE("emu layernorm: 3-d input, large mean, unaligned views", "[emu][kernels]") {
  // Mean 30, spread 0.5: a one-pass E[x^2] - E[x]^2 would lose most digits
  // here (var ~ 0.25 from two terms ~ 900). Both sides are fp32 with different
  // summation orders, and an ulp of x (2e-6) is 4e-6 of the spread, so the
  // check is at 10x the f32 tolerance: still far below a one-pass error.
  check_layernorm(add(Tensor::randn({2, 3, 40}, 5, 0.5f), Tensor::full({2, 3, 40}, 30.f)), DType::f32, 10.0);
  // Row 1 of a width-5 tensor starts 20 bytes in: not 16-byte aligned.
  check_layernorm(Tensor::randn({6, 5}, 6).slice(1, 6), DType::f32);
  // C = 8 is a multiple of the f32 pack, but the view starts 32 + 4 bytes in.
  const Tensor flat = Tensor::randn({41}, 7);
  check_layernorm(flat.slice(9, 41).reshape({4, 8}), DType::f32);
}

TEST_CASE("emu add_layernorm: fused residual forward and backward match the cpu composition", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t C : {5, 64}) {
      INFO(dtype_name(t) << " C = " << C);
      const int64_t N = 37;
      const Tensor x0 = Tensor::randn({N, C}, 21, 1.f), r0 = Tensor::randn({N, C}, 22, 1.f);
      const Tensor w0 = Tensor::randn({C}, 23), b0 = Tensor::randn({C}, 24), w20 = Tensor::randn({C}, 25);
      const Tensor g0 = Tensor::randn({N, C}, 26);
      // A second add_layernorm consumes both outputs of the first, so the
      // first's sum gets its gradient from two places: the caller and its
      // own layernorm.
      auto run = [&](auto&& make, const Tensor& g, std::vector<Tensor>& leaves) {
        leaves = {make(x0), make(r0), make(w0), make(b0), make(w20)};
        for (Tensor& l : leaves) l.set_requires_grad(true);
        const auto [sum, normed] = add_layernorm(leaves[0], leaves[1], leaves[2], leaves[3]);
        const auto [sum2, normed2] = add_layernorm(sum, normed, leaves[4], leaves[3]);
        normed2.backward(g);
        return std::vector<Tensor>{sum, normed, sum2, normed2};
      };
      std::vector<Tensor> lr, le;
      const std::vector<Tensor> ref = run([&](const Tensor& v) { return rounded(v, t); }, rounded(g0, t), lr);
      const std::vector<Tensor> got = run([&](const Tensor& v) { return on_emu(v, t); }, on_emu(g0, t), le);
      CHECK(got[0].device() == kEmu);
      CHECK(got[1].dtype() == t);
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("output " << i);
        // The reference sums are f32; the emu sums round to t, and the second
        // layernorm sees those rounded values: bf16/f16 compare at twice the
        // usual tolerance.
        const Tol tol = tol_for(t);
        const double k = t == DType::f32 ? 1.0 : 2.0;
        CHECK_CLOSE(values(got[i].to(kCPU)), values(i == 0 ? ref[0].to(t).to(DType::f32) : ref[i]), k * tol.atol,
                    k * tol.rtol);
      }
      for (size_t i = 0; i < lr.size(); ++i) {
        INFO("grad of leaf " << i);
        const Tol tol = tol_for(t);
        const double k = t == DType::f32 ? 1.0 : 4.0;
        CHECK_CLOSE(values(le[i].grad().to(kCPU)), values(lr[i].grad()), k * tol.atol, k * tol.rtol);
      }
    }
}

TEST_CASE("emu layernorm: dweight and dbias are bitwise reproducible", "[emu][kernels]") {
  // 37 rows over 4 backward blocks: the partial sums are added in block
  // order, never by float atomics, so two runs give the same bits. (The
  // emulator runs blocks in a fixed order, so it cannot expose atomics'
  // run-to-run variation; that dw/db use none is by construction. This
  // catches run-dependent state, such as scratch read before it is written.)
  const Tensor x0 = Tensor::randn({37, 33}, 31), w0 = Tensor::randn({33}, 32), b0 = Tensor::randn({33}, 33);
  const Tensor g = on_emu(Tensor::randn({37, 33}, 34), DType::f32);
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    Tensor w = on_emu(w0, DType::f32).set_requires_grad(true), b = on_emu(b0, DType::f32).set_requires_grad(true);
    layernorm(on_emu(x0, DType::f32), w, b).backward(g);
    std::vector<double> v = values(w.grad().to(kCPU)), vb = values(b.grad().to(kCPU));
    v.insert(v.end(), vb.begin(), vb.end());
    runs.push_back(v);
  }
  CHECK(runs[0] == runs[1]);
}

TEST_CASE("add_layernorm: finite-difference gradients on the cpu", "[kernels]") {
  std::vector<Tensor> in = {Tensor::randn({3, 5}, 41, 1.f, DType::f64), Tensor::randn({3, 5}, 42, 1.f, DType::f64),
                            Tensor::randn({5}, 43, 1.f, DType::f64), Tensor::randn({5}, 44, 1.f, DType::f64)};
  for (Tensor& t : in) t.set_requires_grad(true);
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& v) {
        const auto [sum, normed] = add_layernorm(v[0], v[1], v[2], v[3]);
        return concat({sum, normed}, 0);
      },
      in);
}

TEST_CASE("emu layernorm: the backward's column sums of dx equal dx's, with dx, dw and db unchanged",
          "[emu][kernels]") {
  // Given dx_sums (a linear layer's bias gradient where dx is its output's
  // whole gradient, engine/ops/layernorm.cpp), each kernel sums dx as it
  // stores it. The launcher is called twice on the same inputs, without and
  // with the sums: dx, dw and db the same bits both times, and the sums
  // those of dx as stored, in double. Cases: 16-bit C = 768 at 37 rows (a
  // pack at a time) and 800 (the staged kernel, 12 warps at three packs),
  // f16 C = 1000 at 800 (staged, four packs), scalar C = 95, f32 C = 64,
  // the block-per-row kernel (f32 C = 1100, bf16 C = 300 scalar), with and
  // without the residual's pending gradient in dx; and no rows (sums of 0).
  struct Case {
    DType t;
    int64_t N, C;
    bool res;
  };
  for (const Case& cs :
       {Case{DType::bf16, 37, 768, true}, Case{DType::bf16, 800, 768, true}, Case{DType::f16, 800, 1000, false},
        Case{DType::bf16, 37, 95, true}, Case{DType::f32, 37, 64, false}, Case{DType::f32, 5, 1100, true},
        Case{DType::bf16, 5, 300, false}, Case{DType::bf16, 0, 64, true}}) {
    const int64_t N = cs.N, C = cs.C;
    INFO(dtype_name(cs.t) << " N = " << N << " C = " << C << (cs.res ? " with the residual's gradient" : ""));
    const gpu::Storage st = gpu::storage_of(cs.t);
    const Tensor x = on_emu(Tensor::randn({N, C}, uint64_t(N + C), 2.f), cs.t);
    const Tensor w = on_emu(Tensor::randn({C}, 81), cs.t), b = on_emu(Tensor::randn({C}, 82), cs.t);
    const Tensor dout = on_emu(Tensor::randn({N, C}, 83), cs.t), dres = on_emu(Tensor::randn({N, C}, 84), cs.t);
    const Tensor out = Tensor::empty({N, C}, cs.t, kEmu), mean = Tensor::empty({N}, DType::f32, kEmu),
                 rstd = Tensor::empty({N}, DType::f32, kEmu);
    ENGINE_GPU_CALL(kEmu, layernorm_forward, st, x.data_ptr(), w.data_ptr(), b.data_ptr(), out.data_ptr(),
                    mean.data<float>(), rstd.data<float>(), N, C, 1e-5, nullptr);
    auto run = [&](bool sums) {
      std::vector<Tensor> r{Tensor::empty({N, C}, cs.t, kEmu), Tensor::empty({C}, cs.t, kEmu),
                            Tensor::empty({C}, cs.t, kEmu), Tensor::full({C}, std::nanf(""), DType::f32, kEmu)};
      const Tensor scratch = Tensor::empty({gpu::layernorm_backward_scratch_floats(N, C, sums)}, DType::f32, kEmu);
      ENGINE_GPU_CALL(kEmu, fused_residual_layernorm_backward, st, dout.data_ptr(), x.data_ptr(), w.data_ptr(),
                      mean.data<float>(), rstd.data<float>(), cs.res ? dres.data_ptr() : nullptr, r[0].data_ptr(),
                      r[1].data_ptr(), r[2].data_ptr(), sums ? r[3].data<float>() : nullptr, gpu::ParamGrads::storage,
                      scratch.data<float>(), N, C, nullptr);
      return r;
    };
    const std::vector<Tensor> plain = run(false), summed = run(true);
    for (size_t i = 0; i < 3; ++i) {
      INFO("output " << i << " (dx, dw, db)");
      CHECK(values(summed[i].to(kCPU)) == values(plain[i].to(kCPU)));
    }
    const std::vector<double> dx = values(plain[0].to(kCPU)), got = values(summed[3].to(kCPU));
    REQUIRE(got.size() == size_t(C));
    // fp32 sums of N values in another order than the double sum, in a tree
    // some 40 additions deep (a warp's rows, the block's warps, the blocks
    // in the reduce): about 40 u = 2.4e-6 of the column's sum of magnitudes
    // at the worst; checked at 2e-5 of it. A row left out or counted twice
    // moves the sum by about 1 in N of that, 1.25e-3 at 800 rows.
    int bad = 0;
    for (int64_t c = 0; c < C; ++c) {
      double want = 0, mag = 0;
      for (int64_t r = 0; r < N; ++r) want += dx[size_t(r * C + c)], mag += std::abs(dx[size_t(r * C + c)]);
      bad += !(std::abs(got[size_t(c)] - want) <= 2e-5 * mag + 1e-6);
    }
    CHECK(bad == 0);
  }
}
