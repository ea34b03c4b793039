// kernels/cuda/concat.cu (the strided row copy behind concat and split)
// under the emulator against the cpu, through the engine ops concat and
// split, forward and backward. A pure copy: results must be bit-exact in
// every dtype. Shapes: concat along the last dim (GPT-2's qkv layout), the
// first dim and a middle dim, with odd sizes and an empty piece.
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
