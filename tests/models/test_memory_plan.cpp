// The start-up memory plan (models/train/memory_plan.h) against the device
// allocator's measured peak over a real training step (forward, backward,
// AdamW) of GPT-2 and the ViT: on the cpu (fp32 and bf16, with and without
// recompute) and on emu (the CUDA kernels: FlashAttention, bf16 storage).
// The plan must be close (it refuses runs on its word) and, within that,
// rather above the peak than below it (below, a refused batch could have
// fit; above, one that fits could be refused).
#include "engine/memory_report.h"
#include "engine/optim/optimizer.h"
#include "engine/precision.h"
#include "kernels/rng.h"
#include "models/gpt2/gpt2.h"
#include "models/train/memory_plan.h"
#include "models/vit/vit.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;
using eng::test::random_ids;

namespace {

// The allocator's peak over two steps of `loss` from the model's weights
// alone: the second runs with the AdamW moments the first step made, as
// every later step does.
template <typename LossFn>
double measured_peak(Module& m, Device dev, LossFn loss) {
  AdamW opt(decay_groups(m.parameters(), 0.1), 1e-3);
  allocator_for(dev).reset_peak();
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    Tensor l = loss();
    l.backward();
    opt.step();
  }
  return double(allocator_for(dev).stats().peak_bytes);
}

void check_close(double planned, double measured) {
  INFO("planned " << planned / 1e6 << " MB, measured peak " << measured / 1e6 << " MB");
  CHECK(planned >= 0.95 * measured);
  CHECK(planned <= 1.3 * measured);
}

}  // namespace

TEST_CASE("memory plan: GPT-2's planned peak is the measured one, within bounds", "[memory][gpt2]") {
  struct Case {
    Device dev;
    Precision p;
    int64_t L, C, NH, T, B;
    Recompute recompute;
  };
  const Device emu{DeviceType::emu, 0};
  const std::vector<Case> cases{
      {kCPU, Precision::O0, 2, 64, 2, 64, 16, Recompute::no}, {kCPU, Precision::O0, 2, 64, 8, 128, 8, Recompute::no},
      {kCPU, Precision::O2, 3, 96, 4, 64, 16, Recompute::no}, {kCPU, Precision::O0, 4, 64, 4, 64, 16, Recompute::yes},
      {emu, Precision::O0, 2, 64, 2, 32, 8, Recompute::no},   {emu, Precision::O2, 2, 64, 4, 32, 8, Recompute::no}};
  for (const Case& c : cases) {
    GPT2Config g;
    g.vocab_size = 256, g.block_size = c.T, g.n_layer = c.L, g.n_head = c.NH, g.n_embd = c.C;
    INFO(c.dev.str() << " " << precision_name(c.p) << " L" << c.L << " C" << c.C << " NH" << c.NH << " T" << c.T << " B"
                     << c.B << (c.recompute == Recompute::yes ? " recompute" : ""));
    GPT2 m(g, 1, c.dev);
    const Autocast ac(c.p);
    const Tensor x = random_ids(c.B, c.T, 256, 1, c.dev), y = random_ids(c.B, c.T, 256, 2, c.dev);
    const double peak = measured_peak(m, c.dev, [&] { return m.loss(x, y, c.recompute, ac); });
    const BlockStack s{c.L, c.T, c.C, c.NH, 1, false, c.recompute == Recompute::yes};
    const double planned = double(state_bytes(m.num_parameters(), c.p, 1)) +
                           double(c.B) * activation_bytes_per_sample(s, c.dev, c.p, 8.0 * 256);
    check_close(planned, peak);
  }
}

TEST_CASE("memory plan: the ViT's planned peak is the measured one, within bounds", "[memory][vit]") {
  for (const Precision p : {Precision::O0, Precision::O2})
    for (const ViTHead head : {ViTHead::dense, ViTHead::classify}) {
      ViTConfig v;
      v.in_channels = 4, v.img_h = 16, v.img_w = 32, v.patch = 4, v.embed = 64, v.depth = 2, v.heads = 4;
      v.head = head, v.out_channels = 4, v.classes = 10;
      const int64_t B = 16;
      INFO(precision_name(p) << (head == ViTHead::dense ? " dense" : " classify"));
      ViT m(v, 1);
      const Autocast ac(p);
      const Tensor x = Tensor::uniform({B, 4, 16, 32}, 3, -1.f, 1.f);
      const double peak = measured_peak(m, kCPU, [&] {
        return head == ViTHead::dense ? mse_loss(m.forward(x, ac), x)
                                      : cross_entropy(m.forward(x, ac), random_ids(1, B, 10, 4, kCPU).reshape({B}));
      });
      const BlockStack s{v.depth, v.tokens(), v.embed, v.heads};
      const int64_t pixels = v.patch * v.patch * (v.in_channels + (head == ViTHead::dense ? v.out_channels : 0));
      const double planned = double(state_bytes(m.num_parameters(), p, 1)) +
                             double(B) * activation_bytes_per_sample(s, kCPU, p, 22.0 * double(pixels));
      check_close(planned, peak);
    }
}

TEST_CASE("memory plan: state bytes follow the memory report's accounting", "[memory]") {
  CHECK(state_bytes(1000, Precision::O0, 1) == 16000);  // 4 weights + 4 grads + 8 moments
  CHECK(state_bytes(1000, Precision::O2, 1) == 18000);  // + 2 for the 16-bit copies
  CHECK(state_bytes(1000, Precision::O0, 4) == 10000);  // ZeRO-1: the moments over 4 ranks
}
