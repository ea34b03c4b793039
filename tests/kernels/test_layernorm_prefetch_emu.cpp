// The layernorm and RMSNorm backward's prefetching kernel
// (kernels/cuda/layernorm_backward.cu: the staged kernel's rows and
// arithmetic, each warp's next row copied into shared memory by cp.async)
// under the emulator: the same bits as the register-staged kernel it
// replaces (ENGINE_LAYERNORM_BACKWARD=staged), dx, dw, db and dx's column
// sums, where the launcher picks the staged kernel; and the cpu reference's
// values where it runs only when asked (few rows: warps with one row or
// none). The emulator poisons a copy's destination at issue and lands it at
// the wait that covers it, so a read before the wait or a copy issued over
// a buffer still to be read shows as NaN or wrong values here.
#include <cmath>

#include "engine/kernel_profile.h"
#include "kernels/cuda/layernorm.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
// The backward kernel's form while in scope, the one before after.
struct Form {
  explicit Form(gpu::LayernormBackwardForm f) : before(gpu::layernorm_backward_form()) {
    gpu::set_layernorm_backward_form(f);
  }
  ~Form() { gpu::set_layernorm_backward_form(before); }
  gpu::LayernormBackwardForm before;
};

struct Case {
  DType t;
  int64_t N, C;
  bool res, sums, rms;
};

// The launcher's outputs for one case in the given form: dx, dw, db (none
// for RMSNorm) and dx's column sums (with `sums`), as doubles.
std::vector<std::vector<double>> backward(const Case& cs, gpu::LayernormBackwardForm f) {
  const Form form(f);
  const int64_t N = cs.N, C = cs.C;
  const gpu::Storage st = gpu::storage_of(cs.t);
  const Tensor x = on_emu(Tensor::randn({N, C}, uint64_t(N + C), 2.f), cs.t);
  const Tensor w = on_emu(Tensor::randn({C}, 91), cs.t), b = on_emu(Tensor::randn({C}, 92), cs.t);
  const Tensor dout = on_emu(Tensor::randn({N, C}, 93), cs.t), dres = on_emu(Tensor::randn({N, C}, 94), cs.t);
  const Tensor out = Tensor::empty({N, C}, cs.t, kEmu), mean = Tensor::empty({N}, DType::f32, kEmu),
               rstd = Tensor::empty({N}, DType::f32, kEmu);
  const Tensor dx = Tensor::empty({N, C}, cs.t, kEmu), dw = Tensor::empty({C}, cs.t, kEmu),
               db = Tensor::empty({C}, cs.t, kEmu), ds = Tensor::full({C}, std::nanf(""), DType::f32, kEmu);
  const Tensor scratch = Tensor::empty({gpu::layernorm_backward_scratch_floats(N, C, cs.sums)}, DType::f32, kEmu);
  const void* r = cs.res ? dres.data_ptr() : nullptr;
  if (cs.rms) {
    ENGINE_GPU_CALL(kEmu, rmsnorm_forward, st, x.data_ptr(), w.data_ptr(), out.data_ptr(), rstd.data<float>(), N, C,
                    1e-5, nullptr);
    ENGINE_GPU_CALL(kEmu, fused_residual_rmsnorm_backward, st, dout.data_ptr(), x.data_ptr(), w.data_ptr(),
                    rstd.data<float>(), r, dx.data_ptr(), dw.data_ptr(), gpu::ParamGrads::storage,
                    scratch.data<float>(), N, C, nullptr);
    return {values(dx.to(kCPU)), values(dw.to(kCPU))};
  }
  ENGINE_GPU_CALL(kEmu, layernorm_forward, st, x.data_ptr(), w.data_ptr(), b.data_ptr(), out.data_ptr(),
                  mean.data<float>(), rstd.data<float>(), N, C, 1e-5, nullptr);
  ENGINE_GPU_CALL(kEmu, fused_residual_layernorm_backward, st, dout.data_ptr(), x.data_ptr(), w.data_ptr(),
                  mean.data<float>(), rstd.data<float>(), r, dx.data_ptr(), dw.data_ptr(), db.data_ptr(),
                  cs.sums ? ds.data<float>() : nullptr, gpu::ParamGrads::storage, scratch.data<float>(), N, C, nullptr);
  std::vector<std::vector<double>> got{values(dx.to(kCPU)), values(dw.to(kCPU)), values(db.to(kCPU))};
  if (cs.sums) got.push_back(values(ds.to(kCPU)));
  return got;
}
}  // namespace

TEST_CASE("emu layernorm: the prefetching backward gives the staged kernel's bits", "[emu][kernels]") {
  // Both forms asked for by name (each takes its kernel at any number of
  // rows), at two to four rows a warp, so that each warp's second buffer
  // is filled while it works on its first, and its first again: 100 rows
  // on the emulator's 4 blocks (48 warps at three packs a lane, 32 at
  // four), 8192 on a GPU's 256 (ENGINE_TEST_GPU_DEVICE=cuda: 3072 warps,
  // 2048).
  // 16-bit C = 768 (GPT-2's: three packs a lane, 12 warps) with the
  // residual's gradient and dx's column sums, and without either; f16
  // C = 1000 (four packs, 8 warps, 3 lanes past the row's end in the
  // fourth: their clamped copies); f32 C = 384 (three packs of 4); RMSNorm
  // (no mean, no db) at C = 768.
  const int64_t N = kEmu.type == DeviceType::emu ? 100 : 8192;
  for (const Case& cs : {Case{DType::bf16, N, 768, true, true, false}, Case{DType::bf16, N, 768, false, false, false},
                         Case{DType::f16, N, 1000, true, false, false}, Case{DType::f32, N, 384, true, true, false},
                         Case{DType::bf16, N, 768, true, false, true}}) {
    INFO(dtype_name(cs.t) << " N = " << cs.N << " C = " << cs.C << (cs.res ? " with the residual's gradient" : "")
                          << (cs.sums ? ", dx's sums" : "") << (cs.rms ? ", RMSNorm" : ""));
    const auto staged = backward(cs, gpu::LayernormBackwardForm::staged);
    const auto prefetched = backward(cs, gpu::LayernormBackwardForm::prefetch);
    REQUIRE(staged.size() == prefetched.size());
    for (size_t i = 0; i < staged.size(); ++i) {
      INFO("output " << i << " (dx, dw, db, dx's sums)");
      REQUIRE(prefetched[i].size() == staged[i].size());
      // Counted, not compared as vectors: a failure prints two numbers, not a vector.
      size_t differ = 0, first = staged[i].size();
      for (size_t k = 0; k < staged[i].size(); ++k)
        if (!(prefetched[i][k] == staged[i][k]) && differ++ == 0) first = k;
      INFO("first at " << first);
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("emu layernorm: the prefetching backward asked for at few rows matches the cpu reference", "[emu][kernels]") {
  // ENGINE_LAYERNORM_BACKWARD=prefetch takes the kernel at any number of
  // rows. bf16 C = 768 with the residual's gradient (the emulator's 4
  // blocks of 12 warps): 37 rows leave 11 warps with none (their one
  // commit empty), 100 give every warp two and 4 warps a third (each
  // copied during the row before); f16 C = 1000 without it (4 blocks of
  // 8): 37 rows give 5 warps a second; then f16 C = 1024, the same kernel
  // instance with more shared memory than C = 1000 asked for (the launcher
  // allows each instance the device's most once, not its first call's
  // size: a GPU refuses the launch over it, and so does the emulator).
  // Through the ops: layernorm's backward, given x's pending gradient from
  // the add.
  const Form form(gpu::LayernormBackwardForm::prefetch);
  for (const int64_t N : {37, 100})
    for (const Case& cs :
         {Case{DType::bf16, N, 768, true, false, false}, Case{DType::f16, N, 1000, false, false, false},
          Case{DType::f16, N, 1024, false, false, false}}) {
      const int64_t C = cs.C;
      INFO(dtype_name(cs.t) << " N = " << N << " C = " << C);
      const Tensor a0 = Tensor::randn({N, C}, uint64_t(N + C), 2.f), b0 = Tensor::randn({N, C}, 98);
      const Tensor w0 = Tensor::randn({C}, 95), bias0 = Tensor::randn({C}, 96), g0 = Tensor::randn({N, C}, 97);
      auto run = [&](auto&& make, std::vector<Tensor>& leaves, KernelProfile* prof) {
        const bool ref_side = prof == nullptr;
        leaves = {make(a0), make(b0), make(w0), make(bias0)};
        for (Tensor& l : leaves) l.set_requires_grad(true);
        // x (a node: its gradient is summed at it) + layernorm(x): with
        // the residual's gradient pending at x, the kernel adds it in.
        // The reference rounds x to the storage type, as the emulator's
        // add stores it (the cast's backward passes the gradient through).
        const Tensor x = ref_side ? add(leaves[0], leaves[1]).to(cs.t).to(DType::f64) : add(leaves[0], leaves[1]);
        const Tensor y = layernorm(x, leaves[2], leaves[3]);
        const Tensor out = cs.res ? add(x, y) : y;
        if (prof) prof->start();
        out.backward(make(g0));
        if (prof) prof->stop();
      };
      std::vector<Tensor> ref, got;
      run([&](const Tensor& v) { return rounded(v, cs.t).to(DType::f64); }, ref, nullptr);
      KernelProfile prof(kEmu);
      run([&](const Tensor& v) { return on_emu(v, cs.t); }, got, &prof);
      int calls = 0;
      for (const KernelCall& c : prof.calls()) {
        CHECK(c.name != "axpy_inplace");  // no add after the kernel: it took the residual's gradient
        calls += c.name == "fused_residual_layernorm_backward";
      }
      CHECK(calls == 1);
      const Tol tol = tol_for(cs.t);
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("grad of leaf " << i << " (x's two, w, b)");
        CHECK_CLOSE(values(got[i].grad().to(kCPU)), values(ref[i].grad()), 4 * tol.atol, 4 * tol.rtol);
      }
    }
}

TEST_CASE("emu layernorm: a bad ENGINE_LAYERNORM_BACKWARD is a one-line error", "[emu][kernels]") {
  const Form restore(gpu::layernorm_backward_form());  // the form before, after
  const Tensor x = Tensor::randn({3, 8}, 1).to(kEmu).set_requires_grad(true);
  const Tensor w = Tensor::randn({8}, 2).to(kEmu), b = Tensor::randn({8}, 3).to(kEmu);
  const Tensor y = layernorm(x, w, b);
  ::setenv("ENGINE_LAYERNORM_BACKWARD", "fast", 1);
  gpu::g_layernorm_backward_form.store(-1);  // read the variable again
  CHECK_THROWS_WITH(y.backward(Tensor::full({3, 8}, 1.f).to(kEmu)),
                    Catch::Contains("ENGINE_LAYERNORM_BACKWARD 'fast' is not a form") &&
                        Catch::Contains("use auto, prefetch or staged"));
  ::setenv("ENGINE_LAYERNORM_BACKWARD", "staged", 1);
  gpu::g_layernorm_backward_form.store(-1);
  CHECK(gpu::layernorm_backward_form() == gpu::LayernormBackwardForm::staged);
  ::unsetenv("ENGINE_LAYERNORM_BACKWARD");
}
