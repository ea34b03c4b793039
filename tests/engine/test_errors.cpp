// Bad input must fail loudly and usefully: every op throws eng::Error whose
// message names the op and the offending shapes, dtypes, devices or values,
// so a user can find the mistake without a debugger. One TEST_CASE per
// category: shapes, dtypes, devices, out-of-range values.
#include "base/error.h"
#include "tests/test_util.h"

using namespace eng;
using Catch::Contains;

namespace {
Tensor f32(const Shape& s) { return Tensor::zeros(s, DType::f32); }
}  // namespace

TEST_CASE("errors: mismatched shapes name the op and both shapes", "[errors]") {
  CHECK_THROWS_AS(matmul(f32({2, 3}), f32({4, 5})), Error);
  CHECK_THROWS_WITH(matmul(f32({2, 3}), f32({4, 5})), Contains("matmul") && Contains("(2, 3)") && Contains("(4, 5)"));
  CHECK_THROWS_WITH(matmul(f32({2, 3}), f32({2, 5}), Trans::N, Trans::T),
                    Contains("matmul") && Contains("(2, 3)") && Contains("(2, 5)"));
  CHECK_THROWS_WITH(matmul(f32({2, 2, 3}), f32({3, 2, 4})),
                    Contains("matmul") && Contains("(2, 2, 3)") && Contains("(3, 2, 4)"));
  CHECK_THROWS_WITH(matmul(f32({2, 3}), f32({3, 4}), Trans::N, Trans::N, f32({5})),
                    Contains("matmul") && Contains("bias") && Contains("(5,)"));
  CHECK_THROWS_WITH(linear(f32({2, 3}), f32({4, 5})), Contains("linear") && Contains("(2, 3)") && Contains("(4, 5)"));
  CHECK_THROWS_WITH(linear_gelu(f32({2, 3}), f32({4, 5}), f32({4})),
                    Contains("linear_gelu") && Contains("(2, 3)") && Contains("(4, 5)"));
  CHECK_THROWS_WITH(linear_gelu(f32({2, 3}), f32({4, 3}), f32({5})),
                    Contains("linear_gelu") && Contains("bias") && Contains("(5,)") && Contains("(4, 3)"));
  CHECK_THROWS_WITH(linear_gelu(f32({2, 3}), f32({4, 3}), Tensor()), Contains("linear_gelu") && Contains("bias"));
  CHECK_THROWS_WITH(add(f32({2, 3}), f32({3, 2})), Contains("add") && Contains("(2, 3)") && Contains("(3, 2)"));
  CHECK_THROWS_WITH(mul(f32({6}), f32({2, 3})), Contains("mul") && Contains("(6,)") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(mse_loss(f32({4}), f32({5})), Contains("mse_loss") && Contains("(4,)") && Contains("(5,)"));
  CHECK_THROWS_WITH(layernorm(f32({2, 4}), f32({3}), f32({4})),
                    Contains("layernorm") && Contains("(3,)") && Contains("(2, 4)"));
  CHECK_THROWS_WITH(softmax(f32({2, 3, 4}), Causal::yes), Contains("softmax") && Contains("(2, 3, 4)"));
  CHECK_THROWS_WITH(attention(f32({1, 4, 2, 3}), f32({1, 5, 2, 3}), f32({1, 4, 2, 3})),
                    Contains("attention") && Contains("(1, 4, 2, 3)") && Contains("(1, 5, 2, 3)"));
  CHECK_THROWS_WITH(attention(f32({4, 2, 3}), f32({4, 2, 3}), f32({4, 2, 3})),
                    Contains("attention") && Contains("(4, 2, 3)"));
  CHECK_THROWS_WITH(cross_entropy(f32({3, 5}), Tensor::from_ints({1, 2}, {2})),
                    Contains("cross_entropy") && Contains("(2,)") && Contains("(3, 5)"));
  CHECK_THROWS_WITH(concat({f32({2, 3}), f32({2, 4})}, 0),
                    Contains("concat") && Contains("(2, 3)") && Contains("(2, 4)"));
  CHECK_THROWS_WITH(concat({f32({2, 3}), f32({2, 3, 1})}, 0),
                    Contains("concat") && Contains("(2, 3)") && Contains("(2, 3, 1)"));
  CHECK_THROWS_WITH(split(f32({2, 7}), {3, 3}, 1), Contains("split") && Contains("(2, 7)") && Contains("6"));
  CHECK_THROWS_WITH(f32({4, 2}).reshape({3, 3}), Contains("reshape") && Contains("(4, 2)") && Contains("(3, 3)"));
  CHECK_THROWS_WITH(f32({4, 2}).reshape({-1, 3}), Contains("reshape") && Contains("(4, 2)") && Contains("(-1, 3)"));
  CHECK_THROWS_WITH(permute(f32({2, 3}), {0, 0}), Contains("permute") && Contains("(2, 3)"));
  CHECK_THROWS_WITH(sum(f32({2, 3}), 2), Contains("sum") && Contains("dim 2"));
  CHECK_THROWS_WITH(f32({4, 2}).slice(3, 5), Contains("slice") && Contains("(4, 2)"));
  // A gradient of the wrong shape for backward.
  Tensor x = Tensor::zeros({2, 3}, DType::f64).set_requires_grad(true);
  CHECK_THROWS_WITH(scale(x, 2.0).backward(Tensor::zeros({3, 2}, DType::f64)),
                    Contains("backward") && Contains("(3, 2)") && Contains("(2, 3)"));
}

TEST_CASE("errors: wrong dtypes name the op and the dtype", "[errors]") {
  const Tensor i32 = Tensor::from_ints({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK_THROWS_AS(gelu(i32), Error);
  CHECK_THROWS_WITH(gelu(i32), Contains("gelu") && Contains("i32(2, 3)"));
  CHECK_THROWS_WITH(matmul(i32, Tensor::from_ints({1, 2, 3}, {3, 1})), Contains("matmul") && Contains("i32"));
  CHECK_THROWS_WITH(matmul(i32, f32({3, 1})), Contains("matmul") && Contains("i32(2, 3)") && Contains("f32(3, 1)"));
  const Tensor f32_ids = Tensor::from_vector({0, 1}, {2});
  CHECK_THROWS_WITH(embedding(f32({4, 3}), f32_ids), Contains("embedding") && Contains("i32") && Contains("f32(2,)"));
  CHECK_THROWS_WITH(cross_entropy(f32({2, 4}), f32_ids),
                    Contains("cross_entropy") && Contains("i32") && Contains("f32(2,)"));
  CHECK_THROWS_WITH(add(f32({2}), Tensor::zeros({2}, DType::f64)),
                    Contains("add") && Contains("f32(2,)") && Contains("f64(2,)"));
  CHECK_THROWS_WITH(concat({f32({2}), Tensor::zeros({2}, DType::f64)}, 0),
                    Contains("concat") && Contains("f32(2,)") && Contains("f64(2,)"));
  // 16-bit floats are storage formats; the cpu kernels compute in f32/f64 only.
  const Tensor bf = f32({2, 3}).to(DType::bf16);
  CHECK_THROWS_WITH(gelu(bf), Contains("gelu") && Contains("bf16"));
  CHECK_THROWS_WITH(layernorm(bf, f32({3}).to(DType::bf16), f32({3}).to(DType::bf16)),
                    Contains("layernorm") && Contains("bf16(2, 3)"));
  CHECK_THROWS_WITH(softmax(f32({2, 3}).to(DType::f16)), Contains("softmax") && Contains("f16(2, 3)"));
  // Only floating tensors can require grad.
  Tensor ids = Tensor::from_ints({1}, {1});
  CHECK_THROWS_WITH(ids.set_requires_grad(true), Contains("requires_grad") && Contains("i32(1,)"));
}

TEST_CASE("errors: mixed or kernel-less devices name the op and the devices", "[errors]") {
  const Device emu = Device::parse("emu");
  const Tensor c = f32({2, 3}), e = f32({2, 3}).to(emu);
  CHECK_THROWS_AS(add(c, e), Error);
  CHECK_THROWS_WITH(add(c, e), Contains("add") && Contains("on cpu") && Contains("on emu"));
  CHECK_THROWS_WITH(matmul(c, f32({3, 4}).to(emu)),
                    Contains("matmul") && Contains("(2, 3) on cpu") && Contains("(3, 4) on emu"));
  CHECK_THROWS_WITH(embedding(f32({4, 3}), Tensor::from_ints({0, 1}, {2}).to(emu)),
                    Contains("embedding") && Contains("cpu") && Contains("emu"));
  // An op without an emu kernel says so.
  CHECK_THROWS_WITH(relu(e), Contains("relu") && Contains("emu") && Contains("(2, 3)"));
  // matmul runs on emu (kernels/cuda/gemm.cu), but not in f64.
  const Tensor e64 = Tensor::zeros({2, 3}, DType::f64, emu);
  CHECK_THROWS_WITH(matmul(e64, Tensor::zeros({3, 4}, DType::f64, emu)),
                    Contains("matmul") && Contains("f64") && Contains("emu"));
  // add runs on emu (kernels/cuda/elementwise.cu), but not in f64.
  CHECK_THROWS_WITH(add(e64, e64), Contains("add") && Contains("f64") && Contains("emu"));
}

TEST_CASE("errors: out-of-range ids and targets name the op, the value and the vocabulary", "[errors]") {
  const Tensor w = f32({5, 3});
  CHECK_THROWS_AS(embedding(w, Tensor::from_ints({0, 5}, {2})), Error);
  CHECK_THROWS_WITH(embedding(w, Tensor::from_ints({0, 5}, {2})),
                    Contains("embedding") && Contains("id 5") && Contains("[0, 5)"));
  CHECK_THROWS_WITH(embedding(w, Tensor::from_ints({2, -1, 0}, {3})),
                    Contains("embedding") && Contains("id -1") && Contains("position 1"));
  const Tensor logits = f32({3, 4});
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ints({0, 4, 1}, {3})),
                    Contains("cross_entropy") && Contains("target 4") && Contains("row 1") && Contains("[0, 4)"));
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ints({0, 1, -3}, {3})),
                    Contains("cross_entropy") && Contains("target -3"));
  // -100 is only special when it is the ignore_index.
  CHECK_THROWS_WITH(cross_entropy(logits, Tensor::from_ints({-100, 1, 2}, {3}), 0),
                    Contains("cross_entropy") && Contains("target -100"));
  CHECK_THROWS_WITH(dropout(f32({2}), 1.0, 0, 0), Contains("dropout") && Contains("1"));
  CHECK_THROWS_WITH(transpose(f32({2, 3}), 0, 2), Contains("transpose") && Contains("dim 2"));
}
