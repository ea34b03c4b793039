// kernels/cuda/permute.cu under the emulator: permute and transpose on emu,
// forward and backward, bit-exact against the cpu reference (a permute only
// moves bits), in f32, bf16 and f16, for every permutation of a 3-d and a
// 4-d shape with odd and unit sizes, an 8-d shape, and a 2-d transpose.
#include <algorithm>
#include <numeric>

#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
// x permuted on emu and on the cpu, with the gradient of a weighted sum; the
// cpu works on the values rounded to t (exact in f32), so both must agree bit for bit.
void check_permute(const Shape& shape, const std::vector<int>& dims, DType t, uint64_t seed) {
  const int64_t n = shape_numel(shape);
  const Tensor x = Tensor::randn(shape, seed), w = Tensor::randn({n}, seed + 1);
  Tensor xr = rounded(x, t).set_requires_grad(true), xe = on_emu(x, t).set_requires_grad(true);
  Tensor ref = permute(xr, dims), out = permute(xe, dims);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == t);
  CHECK(out.shape() == ref.shape());
  CHECK(values(out) == values(ref));
  ref.backward(rounded(w, t).reshape(ref.shape()));
  out.backward(on_emu(w, t).reshape(out.shape()));
  CHECK(values(xe.grad()) == values(xr.grad()));
}
}  // namespace

TEST_CASE("emu permute: every permutation, forward and backward, bit-exact", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (const Shape& shape : {Shape{3, 5, 7}, Shape{2, 1, 3, 5}}) {
      std::vector<int> dims(shape.size());
      std::iota(dims.begin(), dims.end(), 0);
      do {
        INFO(dtype_name(t) << " shape " << shape_str(shape) << " dims " << dims[0] << dims[1] << dims[2]);
        check_permute(shape, dims, t, 40);
      } while (std::next_permutation(dims.begin(), dims.end()));
    }
    INFO(dtype_name(t));
    check_permute({2, 1, 3, 2, 1, 2, 3, 2}, {7, 2, 5, 0, 6, 1, 4, 3}, t, 41);  // 8 dims
    check_permute({1}, {0}, t, 42);
  }
}

TEST_CASE("emu transpose: 2-d and batched, more elements than one grid pass", "[emu][kernels]") {
  const Tensor x = Tensor::randn({33, 70}, 43), y = Tensor::randn({2, 9, 17}, 44);
  CHECK(values(transpose(x.to(kEmu), 0, 1)) == values(transpose(x, 0, 1)));
  CHECK(values(transpose(y.to(kEmu), -1, -2)) == values(transpose(y, -1, -2)));
  CHECK(values(transpose(transpose(y.to(kEmu), 0, 2), 2, 0)) == values(y));
}
