// Finite-difference gradient checks (f64, central differences) for the ops
// that move or reduce data rather than compute: permute/transpose, sum/mean,
// concat/split, dropout with a fixed mask, and the reshape/slice views.
// Their backward passes are index bookkeeping, where off-by-one and
// wrong-stride mistakes hide; the finite differences see every slot.
#include "tests/test_util.h"

using namespace eng;
using test::leaf;
using Inputs = std::vector<Tensor>;

TEST_CASE("gradcheck: permute and transpose", "[gradcheck]") {
  CHECK_GRADCHECK([](const Inputs& x) { return permute(x[0], {2, 0, 1}); }, {leaf({2, 3, 5}, 1)});
  CHECK_GRADCHECK([](const Inputs& x) { return permute(x[0], {1, -1, 0}); }, {leaf({2, 3, 5}, 2)});
  CHECK_GRADCHECK([](const Inputs& x) { return permute(x[0], {3, 1, 0, 2}); }, {leaf({2, 1, 3, 2}, 3)});
  CHECK_GRADCHECK([](const Inputs& x) { return permute(x[0], {0, 1}); }, {leaf({3, 4}, 4)});  // identity
  CHECK_GRADCHECK([](const Inputs& x) { return transpose(x[0], 0, 2); }, {leaf({2, 3, 5}, 5)});
  CHECK_GRADCHECK([](const Inputs& x) { return transpose(x[0], -1, -2); }, {leaf({1, 3, 7}, 6)});
  // The (B, T, NH, HS) <-> (B, NH, T, HS) shuffle a transformer does around attention.
  CHECK_GRADCHECK(
      [](const Inputs& x) {
        return permute(permute(x[0], {0, 2, 1, 3}), {0, 2, 1, 3});
      },
      {leaf({2, 3, 2, 3}, 7)});
}

TEST_CASE("gradcheck: sum and mean over everything and along one dim", "[gradcheck]") {
  const Shape s{2, 3, 5};
  CHECK_GRADCHECK([](const Inputs& x) { return sum(x[0]); }, {leaf(s, 10)});
  CHECK_GRADCHECK([](const Inputs& x) { return mean(x[0]); }, {leaf(s, 11)});
  CHECK_GRADCHECK([](const Inputs& x) { return mean(x[0]); }, {leaf({1}, 12)});
  for (int dim : {0, 1, 2, -1})
    for (bool keep : {false, true}) {
      INFO("dim " << dim << " keepdim " << keep);
      CHECK_GRADCHECK([&](const Inputs& x) { return sum(x[0], dim, keep); }, {leaf(s, 13)});
      CHECK_GRADCHECK([&](const Inputs& x) { return mean(x[0], dim, keep); }, {leaf(s, 14)});
    }
  // Reducing a size-1 dim is a reshape; reducing the only dim gives a scalar.
  CHECK_GRADCHECK([](const Inputs& x) { return sum(x[0], 1); }, {leaf({3, 1, 2}, 15)});
  CHECK_GRADCHECK([](const Inputs& x) { return mean(x[0], 0); }, {leaf({7}, 16)});
}

TEST_CASE("gradcheck: concat along dim 0, a middle dim and the last dim", "[gradcheck]") {
  CHECK_GRADCHECK([](const Inputs& x) { return concat({x[0], x[1]}, 0); }, {leaf({2, 3, 4}, 20), leaf({1, 3, 4}, 21)});
  CHECK_GRADCHECK(
      [](const Inputs& x) {
        return concat({x[0], x[1], x[2]}, 1);
      },
      {leaf({2, 3, 4}, 22), leaf({2, 1, 4}, 23), leaf({2, 5, 4}, 24)});
  CHECK_GRADCHECK([](const Inputs& x) { return concat({x[0], x[1]}, -1); }, {leaf({3, 2}, 25), leaf({3, 5}, 26)});
  // The same tensor twice: both copies' gradients must be summed.
  CHECK_GRADCHECK([](const Inputs& x) { return concat({x[0], x[1], x[0]}, 1); }, {leaf({2, 3}, 27), leaf({2, 1}, 28)});
  // An input that does not require grad in the middle must not shift the others' slots.
  const Tensor c = Tensor::randn({2, 2, 3}, 29, 1.f, DType::f64);
  CHECK_GRADCHECK(
      [&](const Inputs& x) {
        return concat({x[0], c, x[1]}, 1);
      },
      {leaf({2, 1, 3}, 30), leaf({2, 3, 3}, 31)});
}

TEST_CASE("gradcheck: split, each piece and all pieces together", "[gradcheck]") {
  const std::vector<int64_t> sizes{2, 1, 4};
  for (int dim : {0, 1, 2}) {
    Shape s{3, 5, 2};
    s[size_t(dim)] = 7;
    for (size_t piece = 0; piece < sizes.size(); ++piece) {
      INFO("dim " << dim << " piece " << piece);
      CHECK_GRADCHECK([&](const Inputs& x) { return split(x[0], sizes, dim)[piece]; }, {leaf(s, 40)});
    }
    // Every piece feeds the loss through a different op, so each slot of x's
    // gradient has its own formula and a misplaced piece shows up.
    INFO("dim " << dim << " all pieces");
    CHECK_GRADCHECK(
        [&](const Inputs& x) {
          std::vector<Tensor> p = split(x[0], sizes, dim);
          return add(add(sum(mul(p[0], p[0])), scale(sum(p[1]), 3.0)), mean(p[2]));
        },
        {leaf(s, 41)});
  }
  // narrow is split's piece; outside the dim it is a one-line error.
  const Tensor t3 = Tensor::randn({3, 7, 2}, 44);
  CHECK(narrow(t3, 1, 2, 1).to_vector() == split(t3, sizes, 1)[1].to_vector());
  CHECK(narrow(t3, 1, 3, 4).to_vector() == split(t3, sizes, 1)[2].to_vector());
  CHECK(narrow(t3, -1, 1, 1).shape() == Shape{3, 7, 1});
  CHECK_THROWS_WITH(narrow(t3, 1, 5, 3), Catch::Contains("narrow: [5, 8) is outside dim 1 of f32(3, 7, 2)"));
  // pad_rows: zero rows after x's; the gradient is the first rows' (f64 to f64).
  CHECK_GRADCHECK([](const Inputs& x) { return mul(pad_rows(x[0], 5, DType::f64), x[1]); },
                  {leaf({3, 2}, 45), leaf({5, 2}, 46)});
  // A zero-sized piece and a piece covering the whole dim.
  CHECK_GRADCHECK([](const Inputs& x) { return split(x[0], {0, 3}, 1)[1]; }, {leaf({2, 3}, 42)});
  // split then concat in another order: a permutation of rows.
  CHECK_GRADCHECK(
      [](const Inputs& x) {
        std::vector<Tensor> p = split(x[0], {1, 2, 2}, 0);
        return concat({p[2], p[0], p[1]}, 0);
      },
      {leaf({5, 3}, 43)});
}

TEST_CASE("gradcheck: dropout with a fixed seed and offset", "[gradcheck]") {
  // The mask is a pure function of (seed, offset + index), so for fixed
  // arguments dropout is linear in x and the finite differences are exact.
  CHECK_GRADCHECK([](const Inputs& x) { return dropout(x[0], 0.3, 42, 7); }, {leaf({4, 6}, 50)});
  CHECK_GRADCHECK([](const Inputs& x) { return dropout(x[0], 0.9, 1, 0); }, {leaf({5, 7}, 51)});
  CHECK_GRADCHECK([](const Inputs& x) { return dropout(x[0], 0.0, 3, 0); }, {leaf({3}, 52)});
  // Dropout inside a chain: the mask must be the same in forward and backward.
  CHECK_GRADCHECK([](const Inputs& x) { return mul(dropout(gelu(x[0]), 0.5, 9, 100), x[1]); },
                  {leaf({3, 5}, 53), leaf({3, 5}, 54)});
}

TEST_CASE("gradcheck: reshape and slice views", "[gradcheck]") {
  CHECK_GRADCHECK(
      [](const Inputs& x) {
        return mul(x[0].reshape({3, 4}), x[1]);
      },
      {leaf({2, 6}, 60), leaf({3, 4}, 61)});
  CHECK_GRADCHECK([](const Inputs& x) { return x[0].reshape({-1}); }, {leaf({2, 3, 2}, 62)});
  CHECK_GRADCHECK([](const Inputs& x) { return x[0].slice(1, 4); }, {leaf({5, 3}, 63)});
  CHECK_GRADCHECK([](const Inputs& x) { return x[0].slice(0, 1); }, {leaf({1, 2, 2}, 64)});
  // Overlapping slices of one tensor: rows 1..2 get both contributions.
  CHECK_GRADCHECK([](const Inputs& x) { return add(mul(x[0].slice(0, 3), x[0].slice(0, 3)), x[0].slice(1, 4)); },
                  {leaf({5, 3}, 65)});
  // A view of a view, and a view feeding an op that saves its input.
  CHECK_GRADCHECK(
      [](const Inputs& x) {
        return gelu(x[0].reshape({6, 2}).slice(2, 5).reshape({2, 3}));
      },
      {leaf({3, 4}, 66)});
}
