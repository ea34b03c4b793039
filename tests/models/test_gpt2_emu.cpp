// A one-block GPT-2 gives the same loss and the same gradient for every
// parameter on the emu device (the hand-written CUDA kernels, emulated:
// embedding, layernorm, GEMMs, split, fused attention, GELU, add, fused
// cross-entropy) as on the cpu reference: the "one transformer layer on cpu
// and emu" check. fp32 throughout; tolerance 1e-4 relative, 1e-5 absolute
// (tiled GEMMs, block reductions and the online softmax sum in other orders
// than OpenBLAS and the serial cpu loops). T = 13 is not a multiple of the
// attention tile (16), so the ragged tile path runs inside the model too.
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
