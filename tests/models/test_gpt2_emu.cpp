// A one-block GPT-2 gives the same loss and the same gradient for every
// parameter on the emu device (the hand-written CUDA kernels, emulated:
// embedding, layernorm, GEMMs, split, fused attention, GELU, add, fused
// cross-entropy) as on the cpu reference: the "one transformer layer on cpu
// and emu" check. fp32 throughout; tolerance 1e-4 relative, 1e-5 absolute
// (tiled GEMMs, block reductions and the online softmax sum in other orders
// than OpenBLAS and the serial cpu loops). T = 13 is not a multiple of the
// attention tile (16), so the ragged tile path runs inside the model too.
// The padded vocabulary (GPT2Config::pad_vocab_to) at O2 equals the
// unpadded model: the logits bit for bit, the loss and every gradient to
// the last bits of a reordered sum.
#include "engine/precision.h"
#include "kernels/rng.h"
#include "models/gpt2/gpt2.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;
using eng::test::random_ids;

TEST_CASE("gpt2: one block gives the same loss and gradients on cpu and emu", "[emu][e2e][gpt2]") {
  const Device emu{DeviceType::emu, 0};
  GPT2Config c;
  c.vocab_size = 37, c.block_size = 16, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
  const GPT2 cpu_model(c, 3), emu_model(c, 3, emu);
  const int64_t B = 2, T = 13;
  const Tensor loss_cpu =
      cpu_model.loss(random_ids(B, T, c.vocab_size, 1, kCPU), random_ids(B, T, c.vocab_size, 2, kCPU));
  const Tensor loss_emu =
      emu_model.loss(random_ids(B, T, c.vocab_size, 1, emu), random_ids(B, T, c.vocab_size, 2, emu));
  CHECK(loss_emu.device() == emu);
  CHECK_CLOSE(test::values(loss_emu.to(kCPU)), test::values(loss_cpu), 1e-5, 1e-4);
  loss_cpu.backward();
  loss_emu.backward();
  test::check_same_grads(cpu_model, emu_model, 1e-5, 1e-4);
}

TEST_CASE("gpt2: the vocabulary padded for the lm_head's GEMMs changes no logit, loss or gradient (emu, O2)",
          "[emu][e2e][gpt2]") {
  const Device emu{DeviceType::emu, 0};
  GPT2Config c;
  c.vocab_size = 37, c.block_size = 16, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
  GPT2Config plain = c;
  plain.pad_vocab_to = 1;
  const GPT2 padded_model(c, 3, emu), plain_model(plain, 3, emu);
  const Autocast o2(Precision::O2);
  REQUIRE(padded_model.head_width(o2, emu) == 64);
  REQUIRE(plain_model.head_width(o2, emu) == 37);
  CHECK(padded_model.head_width(Autocast(), emu) == 37);  // fp32: the head's weight is not copied, so not padded
  CHECK(padded_model.head_width(o2, kCPU) == 37);
  const int64_t B = 2, T = 13;
  const Tensor ids = random_ids(B, T, c.vocab_size, 1, emu), targets = random_ids(B, T, c.vocab_size, 2, emu);
  {
    const NoGradGuard ng;
    const Tensor wide = padded_model.forward_padded(ids, Recompute::no, o2);
    REQUIRE(wide.shape() == Shape{B * T, 64});
    CHECK(test::values(padded_model.forward(ids, Recompute::no, o2).to(kCPU)) ==
          test::values(plain_model.forward(ids, Recompute::no, o2).to(kCPU)));
    const std::vector<double> w = test::values(wide.to(kCPU).to(DType::f32));
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t v = 37; v < 64; ++v) CHECK(w[size_t(r * 64 + v)] == 0.0);
  }
  // The cross-entropy folds a padded row's 16-byte packs where the unpadded
  // row (37 wide) goes element by element: the same sums in another order,
  // so the loss may move in its last bits and a bf16 dlogit by an ulp.
  const Tensor loss_padded = padded_model.loss(ids, targets, Recompute::no, o2);
  const Tensor loss_plain = plain_model.loss(ids, targets, Recompute::no, o2);
  CHECK_CLOSE(test::values(loss_padded.to(kCPU)), test::values(loss_plain.to(kCPU)), 1e-6, 1e-6);
  loss_padded.backward();
  loss_plain.backward();
  test::check_same_grads(plain_model, padded_model, 1e-5, 1e-2);
}
