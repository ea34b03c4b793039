// kernels/cuda/elementwise.cu under the emulator against the cpu reference:
// add, sub, mul, scale, add_bias forward and backward, the in-place add_ (axpy, which
// autograd uses to accumulate gradients), scale_ and fill_, in f32, bf16 and
// f16 (tolerances: tests/kernels/emu_check.h), on sizes that are not
// multiples of a 16-byte pack or a block, and on unaligned views.
#include <cmath>
#include <utility>

#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
constexpr DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};
constexpr int64_t kSizes[] = {1, 7, 33, 1000, 4099};
}  // namespace

TEST_CASE("emu add/sub/mul/scale: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : kDtypes)
    for (int64_t n : kSizes) {
      INFO(dtype_name(t) << " n = " << n);
      const Tensor a = Tensor::randn({n}, uint64_t(n)), b = Tensor::randn({n}, uint64_t(n) + 1);
      const Tensor g = Tensor::randn({n}, uint64_t(n) + 2);
      // y = scale(a*b - a, 0.5) + b: every op, and a and b each reach y twice,
      // so their gradients are accumulated with add_.
      auto f = [](const Tensor& x, const Tensor& y) { return add(scale(sub(mul(x, y), x), 0.5), y); };
      Tensor ar = rounded(a, t).set_requires_grad(true), br = rounded(b, t).set_requires_grad(true);
      Tensor ref = f(ar, br);
      ref.backward(rounded(g, t));
      Tensor ae = on_emu(a, t).set_requires_grad(true), be = on_emu(b, t).set_requires_grad(true);
      Tensor out = f(ae, be);
      CHECK(out.device() == kEmu);
      CHECK(out.dtype() == t);
      out.backward(on_emu(g, t));
      // Four roundings to the storage type in a chain: twice the one-op tolerance.
      const Tol tol = tol_for(t);
      CHECK_CLOSE(values(out), values(ref), 2 * tol.atol, 2 * tol.rtol);
      CHECK_CLOSE(values(ae.grad()), values(ar.grad()), 2 * tol.atol, 2 * tol.rtol);
      CHECK_CLOSE(values(be.grad()), values(br.grad()), 2 * tol.atol, 2 * tol.rtol);
      // Each op alone, one rounding each.
      CHECK_EMU_CLOSE(add(on_emu(a, t), on_emu(b, t)), add(rounded(a, t), rounded(b, t)), t);
      CHECK_EMU_CLOSE(sub(on_emu(a, t), on_emu(b, t)), sub(rounded(a, t), rounded(b, t)), t);
      CHECK_EMU_CLOSE(mul(on_emu(a, t), on_emu(b, t)), mul(rounded(a, t), rounded(b, t)), t);
      CHECK_EMU_CLOSE(scale(on_emu(a, t), -1.75), scale(rounded(a, t), -1.75), t);
    }
}

TEST_CASE("emu add_bias: forward and bias gradient match the cpu reference", "[emu][kernels]") {
  for (DType t : kDtypes)
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {65, 33}, {300, 129}}) {
      INFO(dtype_name(t) << " rows = " << rows << " cols = " << cols);
      const Tensor x = Tensor::randn({rows, cols}, uint64_t(rows * cols)), b = Tensor::randn({cols}, uint64_t(cols));
      const Tensor g = Tensor::randn({rows, cols}, uint64_t(rows + cols));
      Tensor xr = rounded(x, t).set_requires_grad(true), br = rounded(b, t).set_requires_grad(true);
      Tensor ref = add_bias(xr, br);
      ref.backward(rounded(g, t));
      Tensor xe = on_emu(x, t).set_requires_grad(true), be = on_emu(b, t).set_requires_grad(true);
      Tensor out = add_bias(xe, be);
      out.backward(on_emu(g, t));
      CHECK_EMU_CLOSE(out, ref, t);
      CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
      // The bias gradient sums `rows` values, rounded once: scale the tolerance by sqrt(rows).
      const Tol tol = tol_for(t);
      const double k = std::sqrt(double(rows));
      CHECK_CLOSE(values(be.grad().to(kCPU)), values(br.grad()), k * tol.atol, k * tol.rtol);
    }
}

TEST_CASE("emu add_/scale_/fill_: in place, match the cpu reference", "[emu][kernels]") {
  for (DType t : kDtypes)
    for (int64_t n : kSizes) {
      INFO(dtype_name(t) << " n = " << n);
      const Tensor a = Tensor::randn({n}, uint64_t(n) + 10), b = Tensor::randn({n}, uint64_t(n) + 11);
      Tensor ref = rounded(a, t).clone().detach(), e = on_emu(a, t).clone().detach();
      add_(ref, rounded(b, t), 0.3);
      add_(e, on_emu(b, t), 0.3);
      CHECK_EMU_CLOSE(e, ref, t);
      ref = rounded(e.to(kCPU), t).clone().detach();  // same start, so scale_ is checked alone
      scale_(ref, 1.5);
      scale_(e, 1.5);
      CHECK_EMU_CLOSE(e, ref, t);
      fill_(e, 0.1);
      CHECK(values(e.to(kCPU)) == values(Tensor::full({n}, 0.1, t)));  // one rounding, bit-exact
    }
}

TEST_CASE("emu elementwise: unaligned views take the scalar path", "[emu][kernels]") {
  const Tensor a = Tensor::randn({9, 3}, 21), b = Tensor::randn({9, 3}, 22);
  const Tensor ae = a.to(kEmu), be = b.to(kEmu);
  CHECK_EMU_CLOSE(add(ae.slice(1, 9), be.slice(1, 9)), add(a.slice(1, 9), b.slice(1, 9)), DType::f32);
  CHECK_EMU_CLOSE(mul(ae.slice(1, 8), be.slice(0, 7)), mul(a.slice(1, 8), b.slice(0, 7)), DType::f32);
  Tensor view = ae.slice(1, 8);  // shares ae's storage: add_ writes through the view
  add_(view, be.slice(2, 9), -2.0);
  Tensor ref_full = a.clone().detach();
  Tensor ref_view = ref_full.slice(1, 8);
  add_(ref_view, b.slice(2, 9), -2.0);
  CHECK_EMU_CLOSE(ae, ref_full, DType::f32);
  fill_(view, 3.0);
  CHECK(values(ae.slice(1, 8).to(kCPU)) == std::vector<double>(21, 3.0));
  CHECK(values(ae.slice(0, 1).to(kCPU)) == values(ref_full.slice(0, 1)));
}
