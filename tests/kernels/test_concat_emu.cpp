// kernels/cuda/concat.cu (the strided row copy behind concat and split)
// under the emulator against the cpu, through the engine ops concat and
// split, forward and backward. A pure copy: results must be bit-exact in
// every dtype. Shapes: concat along the last dim (GPT-2's qkv layout), the
// first dim and a middle dim, with odd sizes and an empty piece. pad_rows
// (a table cast to the compute dtype with zero rows appended, the padded
// lm_head of models/gpt2) against the host cast.
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("emu concat and split: bit-exact against the cpu, forward and backward", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int dim : {0, 1, -1}) {
      INFO(dtype_name(t) << " dim = " << dim);
      const Tensor x0 = Tensor::randn({5, 7, 3}, 1), x1 = Tensor::randn({5, 7, 3}, 2);
      const int d = dim < 0 ? 2 : dim;
      const std::vector<int64_t> sizes = d == 0   ? std::vector<int64_t>{2, 0, 3}
                                         : d == 1 ? std::vector<int64_t>{4, 3, 0}
                                                  : std::vector<int64_t>{1, 0, 2};
      // split on the cpu (rounded values) and on emu; then concat the pieces
      // back with a second tensor and backpropagate a random gradient.
      Tensor xr = rounded(x0, t).set_requires_grad(true), yr = rounded(x1, t).set_requires_grad(true);
      Tensor xe = on_emu(x0, t).set_requires_grad(true), ye = on_emu(x1, t).set_requires_grad(true);
      const std::vector<Tensor> pr = split(xr, sizes, dim), pe = split(xe, sizes, dim);
      REQUIRE(pe.size() == pr.size());
      for (size_t i = 0; i < pr.size(); ++i) {
        CHECK(pe[i].device() == kEmu);
        CHECK(values(pe[i].to(kCPU)) == values(pr[i]));
      }
      const Tensor cr = concat({pr[2], yr, pr[0]}, dim), ce = concat({pe[2], ye, pe[0]}, dim);
      CHECK(values(ce.to(kCPU)) == values(cr));
      const Tensor g = Tensor::randn(cr.shape(), 9);
      cr.backward(rounded(g, t));
      ce.backward(on_emu(g, t));
      CHECK(values(xe.grad().to(kCPU)) == values(xr.grad()));
      CHECK(values(ye.grad().to(kCPU)) == values(yr.grad()));
    }
}

TEST_CASE("emu pad_rows: the cast rows, then zero rows; the gradient's first rows cast back", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t rows : {7, 8, 64}) {
      INFO(dtype_name(t) << " rows = " << rows);
      const Tensor w = Tensor::randn({7, 6}, 3);
      Tensor we = w.to(kEmu).detach().set_requires_grad(true);
      const Tensor p = pad_rows(we, rows, t);
      REQUIRE(p.shape() == Shape{rows, 6});
      CHECK(p.dtype() == t);
      const std::vector<double> got = values(p.to(kCPU).to(DType::f32)), want = values(w.to(t).to(DType::f32));
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == (i < want.size() ? want[i] : 0.0));
      const Tensor g = Tensor::randn({rows, 6}, 5);
      p.backward(on_emu(g, t));
      CHECK(we.grad().dtype() == DType::f32);
      CHECK(values(we.grad().to(kCPU)) == values(rounded(g, t).slice(0, 7)));
    }
  CHECK_THROWS_WITH(pad_rows(Tensor::randn({7, 6}, 3).to(kEmu), 6, DType::bf16),
                    Catch::Contains("pad_rows: 6 rows for f32(7, 6)"));
}
