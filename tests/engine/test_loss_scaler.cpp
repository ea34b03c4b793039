// Dynamic loss scaling (engine/optim/loss_scaler.h): an overflow skips the
// step (parameters and AdamW state untouched) and halves the scale; a run of
// growth_interval clean steps doubles it; a real fp16 overflow on emu (a loss
// scale too large for fp16 gradients) is caught the same way; and the
// precision levels parse and map to the documented policies.
#include <cmath>
#include <limits>

#include "engine/nn/layers.h"
#include "engine/optim/loss_scaler.h"
#include "engine/precision.h"
#include "tests/test_util.h"

using namespace eng;

namespace {

// One parameter p with the gradient g; AdamW with lr 0.1 moves it.
struct OneParam {
  Tensor p = Tensor::from_vector({1.f, -2.f, 3.f}, {3}).set_requires_grad(true);
  AdamW opt{{ParamGroup{{p}, 0.0, 1.0}}, 0.1};
  void set_grad(std::vector<float> g) { p.set_grad(Tensor::from_vector(g, {3})); }
};

}  // namespace

TEST_CASE("loss scaler: inf gradient skips the step and halves the scale", "[precision]") {
  OneParam m;
  LossScaler scaler(LossScalerOptions{65536.0, 2.0, 0.5, 2000});
  const std::vector<double> before = test::values(m.p);
  m.set_grad({1.f, std::numeric_limits<float>::infinity(), 1.f});
  CHECK_FALSE(scaler.step(m.opt));
  CHECK(test::values(m.p) == before);  // untouched
  CHECK(m.opt.steps() == 0);           // the optimizer never ran
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(scaler.skipped_steps() == 1);
  m.set_grad({1.f, std::nanf(""), 1.f});
  CHECK_FALSE(scaler.step(m.opt));
  CHECK(scaler.get_scale() == 16384.0);
  // A finite gradient: unscaled by 1/S before the step, then the step runs.
  m.set_grad({16384.f, -16384.f, 0.f});
  CHECK(scaler.unscale_(m.opt) == Approx(std::sqrt(2.0)));
  CHECK(test::values(m.p.grad()) == std::vector<double>{1.0, -1.0, 0.0});
  CHECK(scaler.step(m.opt));  // does not unscale twice
  CHECK(m.opt.steps() == 1);
  CHECK(test::values(m.p) != before);
}

TEST_CASE("loss scaler: grows the scale after growth_interval clean steps", "[precision]") {
  OneParam m;
  LossScaler scaler(LossScalerOptions{1024.0, 2.0, 0.5, 3});
  for (int step = 0; step < 3; ++step) {
    CHECK(scaler.get_scale() == 1024.0);
    m.set_grad({1024.f, 512.f, 256.f});
    CHECK(scaler.step(m.opt));
  }
  CHECK(scaler.get_scale() == 2048.0);
  // An overflow resets the run: 3 more clean steps are needed to grow again.
  m.set_grad({std::numeric_limits<float>::infinity(), 0.f, 0.f});
  CHECK_FALSE(scaler.step(m.opt));
  CHECK(scaler.get_scale() == 1024.0);
  for (int step = 0; step < 2; ++step) {
    m.set_grad({1.f, 1.f, 1.f});
    CHECK(scaler.step(m.opt));
  }
  CHECK(scaler.get_scale() == 1024.0);
  m.set_grad({1.f, 1.f, 1.f});
  CHECK(scaler.step(m.opt));
  CHECK(scaler.get_scale() == 2048.0);
  CHECK_THROWS_WITH(LossScaler(LossScalerOptions{1.0, 0.5, 0.5, 1}), Catch::Contains("growth_factor"));
}

TEST_CASE("loss scaler: a loss scale that overflows fp16 gradients on emu is caught", "[precision][emu]") {
  const Device emu{DeviceType::emu, 0};
  Linear fc(4, 3, Bias::yes, InitOptions{7, DType::f32, emu, 0.f});
  AdamW opt(decay_groups(fc.parameters(), 0.0), 1e-2);
  const Tensor x = Tensor::randn({5, 4}, 3).to(emu), y = Tensor::from_ints({0, 1, 2, 1, 0}, {5}).to(emu);
  const Autocast ac(Precision::O2_fp16);
  const std::vector<double> w0 = test::values(fc.weight.to(kCPU));
  auto loss_of = [&] { return cross_entropy(ac.f32(fc.forward(x, ac)), y); };
  // dlogits = S (p - onehot) / 5: with S = 2^24 it is far beyond fp16's 65504,
  // so the cast back to fp16 in the backward gives inf.
  LossScaler big(LossScalerOptions{16777216.0, 2.0, 0.5, 2000});
  big.scale(loss_of()).backward();
  CHECK(fc.weight.grad().dtype() == DType::f32);  // the masters' gradient is fp32
  CHECK_FALSE(big.step(opt));
  CHECK(big.get_scale() == 8388608.0);
  CHECK(test::values(fc.weight.to(kCPU)) == w0);
  // 2^10 fits: the same step goes through.
  opt.zero_grad();
  LossScaler ok(LossScalerOptions{1024.0, 2.0, 0.5, 2000});
  ok.scale(loss_of()).backward();
  CHECK(ok.step(opt));
  CHECK(test::values(fc.weight.to(kCPU)) != w0);
}

TEST_CASE("precision: levels parse and map to their policies", "[precision]") {
  for (const char* name : {"O0", "O1", "O2", "O2-fp16", "O3"})
    CHECK(precision_name(parse_precision(name)) == std::string(name));
  CHECK_THROWS_WITH(parse_precision("O4"), Catch::Contains("O2-fp16"));
  CHECK(precision_policy(Precision::O0).compute == DType::f32);
  CHECK(precision_policy(Precision::O1).tf32_gemm);
  CHECK(precision_policy(Precision::O2).compute == DType::bf16);
  CHECK(precision_policy(Precision::O3).compute == DType::bf16);
  CHECK(precision_policy(Precision::O3).cuda_graph);
  const PrecisionPolicy fp16 = precision_policy(Precision::O2_fp16);
  CHECK(fp16.compute == DType::f16);
  CHECK(fp16.loss_scaling == LossScaling::dynamic);
  CHECK(fp16.master == DType::f32);
  CHECK(fp16.optimizer_state == DType::f32);
  CHECK_THAT(precision_summary(Precision::O3, kCPU), Catch::Contains("runs as O2"));
  CHECK_THAT(precision_summary(Precision::O2, kCPU), Catch::Contains("emulated"));
  // cpu emulation: values rounded to bf16, dtype still f32, gradient flows back.
  Tensor w = Tensor::from_vector({1.00390625f, 3.f}, {2}).set_requires_grad(true);  // 1 + 2^-8 is not a bf16
  Tensor r = Autocast(Precision::O2).cast(w);
  CHECK(r.dtype() == DType::f32);
  CHECK(test::values(r) == std::vector<double>{1.0, 3.0});
  sum(r).backward();
  CHECK(test::values(w.grad()) == std::vector<double>{1.0, 1.0});
  CHECK(Autocast(Precision::O0).cast(w).same(w));
}
