// kernels/cuda/reduce.cu under the emulator against the cpu reference: sum
// and mean along every dim of awkward shapes (size-1 dims, more outputs than
// the emulated grid covers in one pass) forward and backward, and the MSE
// loss and its gradient, in f32, bf16 and f16.
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("emu sum/mean along a dim: forward and backward match the cpu", "[emu][kernels]") {
  const std::vector<Shape> shapes{{7}, {3, 5}, {1, 9, 1}, {4, 17, 33}, {2, 3, 300}};
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (const Shape& s : shapes)
      for (int d = 0; d < int(s.size()); ++d)
        for (bool is_mean : {false, true})
          for (bool keep : {false, true}) {
            INFO(dtype_name(t) << " shape " << Tensor::empty(s).desc() << " dim " << d << (is_mean ? " mean" : " sum")
                               << (keep ? " keepdim" : ""));
            const Tensor x = Tensor::randn(s, uint64_t(7 + d));
            auto f = [&](const Tensor& v) { return is_mean ? mean(v, d, keep) : sum(v, d, keep); };
            Tensor xr = rounded(x, t).set_requires_grad(true);
            Tensor ref = f(xr);
            const Tensor g = Tensor::randn(ref.shape(), 99);
            ref.backward(rounded(g, t));
            Tensor xe = on_emu(x, t).set_requires_grad(true);
            Tensor out = f(xe);
            CHECK(out.device() == kEmu);
            CHECK(out.shape() == ref.shape());
            out.backward(on_emu(g, t));
            // A sum of up to 300 terms rounds once at the end: tolerance scaled by sqrt(n).
            const Tol tol = tol_for(t);
            CHECK_CLOSE(values(out.to(kCPU)), values(ref), tol.atol * 20, tol.rtol * 4);
            CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
          }
}

TEST_CASE("emu mse_loss: loss and both gradients match the cpu", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {1, 5, 257, 3000, 24581}) {  // 24581: partials from more blocks than the grid's cap
      INFO(dtype_name(t) << " n = " << n);
      const Tensor p = Tensor::randn({n}, uint64_t(n)), q = Tensor::randn({n}, uint64_t(n) + 5);
      Tensor pr = rounded(p, t).set_requires_grad(true), qr = rounded(q, t).set_requires_grad(true);
      Tensor ref = mse_loss(pr, qr);
      ref.backward(rounded(Tensor::full({}, 1.5, DType::f32), t));
      Tensor pe = on_emu(p, t).set_requires_grad(true), qe = on_emu(q, t).set_requires_grad(true);
      Tensor out = mse_loss(pe, qe);
      CHECK(out.device() == kEmu);
      CHECK(out.dtype() == t);
      out.backward(on_emu(Tensor::full({}, 1.5, DType::f32), t));
      CHECK_EMU_CLOSE(out, ref, t);
      CHECK_EMU_CLOSE(pe.grad(), pr.grad(), t);
      CHECK_EMU_CLOSE(qe.grad(), qr.grad(), t);
    }
}
