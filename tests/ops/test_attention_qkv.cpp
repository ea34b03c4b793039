// attention_qkv (engine/ops/attention.cpp): attention on a packed (B, T, 3C)
// qkv tensor, which on the cpu reads q, k, v in place and writes dqkv in one
// tensor. Checked by finite differences (double, lengths across the cpu
// kernel's 32-row causal blocks) and against splitting qkv and calling
// attention, the composition it replaces (f32, values and gradient); on emu
// the fused kernels read it in place too, bit for bit the split's result.
#include "engine/kernel_profile.h"
#include "tests/test_util.h"

using namespace eng;
using test::leaf;
using Inputs = std::vector<Tensor>;

TEST_CASE("gradcheck: attention_qkv, causal and not, across the cpu kernel's blocks", "[gradcheck]") {
  // T = 40: a full 32-row block and a ragged one; NH 2, HS 3 (C = 6, qkv 18 wide).
  for (const Causal c : {Causal::yes, Causal::no}) {
    INFO((c == Causal::yes ? "causal" : "not causal"));
    for (const Shape& s : {Shape{1, 40, 18}, Shape{2, 3, 18}}) {
      INFO("qkv " << shape_str(s));
      CHECK_GRADCHECK([c](const Inputs& x) { return attention_qkv(x[0], 2, c); }, {leaf(s, 60)});
    }
  }
}

TEST_CASE("attention_qkv equals split + attention on the cpu, values and gradient (f32)", "[ops]") {
  const int64_t B = 2, T = 70, NH = 3, HS = 8, C = NH * HS;
  const Tensor w = Tensor::randn({B, T, NH, HS}, 71, 1.f);  // loss = sum(out * w): every output counts
  for (const Causal c : {Causal::yes, Causal::no}) {
    INFO((c == Causal::yes ? "causal" : "not causal"));
    Tensor packed = Tensor::randn({B, T, 3 * C}, 70, 1.f).set_requires_grad(true);
    Tensor split_in = packed.detach().set_requires_grad(true);
    const Tensor a = attention_qkv(packed, NH, c);
    sum(mul(a, w)).backward();
    const std::vector<Tensor> p = split(split_in, {C, C, C}, -1);
    const Shape heads{B, T, NH, HS};
    const Tensor b = attention(p[0].reshape(heads), p[1].reshape(heads), p[2].reshape(heads), c);
    sum(mul(b, w)).backward();
    CHECK(a.shape() == b.shape());
    CHECK_CLOSE(test::values(a), test::values(b), 1e-6, 1e-6);
    CHECK_CLOSE(test::values(packed.grad()), test::values(split_in.grad()), 1e-6, 1e-6);
  }
}

TEST_CASE("attention_qkv on emu reads the packed qkv in place: equal to split + attention bit for bit, no copies",
          "[ops][emu]") {
  const Device emu{DeviceType::emu, 0};
  const int64_t B = 2, T = 37, NH = 2, HS = 16, C = NH * HS;  // T: a ragged last tile
  for (const DType t : {DType::f32, DType::bf16})
    for (const Causal c : {Causal::yes, Causal::no}) {
      INFO(dtype_name(t) << (c == Causal::yes ? " causal" : " not causal"));
      const Tensor w = Tensor::randn({B, T, NH, HS}, 81, 1.f).to(t).to(emu);
      Tensor packed = Tensor::randn({B, T, 3 * C}, 80, 1.f).to(t).to(emu).set_requires_grad(true);
      Tensor split_in = packed.detach().set_requires_grad(true);
      KernelProfile prof(emu);
      prof.start();
      const Tensor a = attention_qkv(packed, NH, c);
      prof.stop();
      REQUIRE(prof.calls().size() == 1);  // the kernel alone: no split's copies
      CHECK(prof.calls()[0].name == "attention_forward");
      a.backward(w);  // the gradient of sum(a * w)
      const std::vector<Tensor> p = split(split_in, {C, C, C}, -1);
      const Shape heads{B, T, NH, HS};
      const Tensor b = attention(p[0].reshape(heads), p[1].reshape(heads), p[2].reshape(heads), c);
      b.backward(w);
      CHECK(test::values(a) == test::values(b));  // the same kernels, other strides: the same bits
      CHECK(test::values(packed.grad()) == test::values(split_in.grad()));
    }
}

TEST_CASE("attention_qkv: a qkv whose last dim is not 3 x heads x head size is a one-line error", "[ops]") {
  CHECK_THROWS_WITH(attention_qkv(Tensor::zeros({1, 4, 20}), 3),
                    Catch::Matchers::Contains("attention_qkv: qkv") && Catch::Matchers::Contains("(3 + 2 x 3) heads"));
}
