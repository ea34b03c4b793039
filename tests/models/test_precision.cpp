// Precision levels end to end: the spirals MLP trained under O2 (bf16) and
// O2-fp16 (with dynamic loss scaling) follows O0's loss curve, on emu (the
// CUDA kernels in bf16/f16 storage, emulated) and on the cpu (bf16/f16
// storage emulated by rounding). Threshold: every step's loss within 2% of
// O0's at the same step, the final loss within 1% (measured: at most 0.11%
// apart for O2, 0.02% for O2-fp16, on both devices; the brief's looser 10%/5%
// would let a wrong cast through). bf16 keeps 8 significant bits (~0.4% per
// rounding), so the curves drift apart slowly.
// Also: the memory report's accounting, 16 B/param for fp32 AdamW, 18 mixed.
#include <cmath>
#include <memory>

#include "engine/memory_report.h"
#include "engine/nn/layers.h"
#include "engine/optim/loss_scaler.h"
#include "engine/precision.h"
#include "models/mlp/spirals.h"
#include "tests/test_util.h"

#if defined(ENGINE_HAVE_CUDA)
#include "engine/gpu_context.h"
#endif

using namespace eng;

namespace {

struct Curve {
  std::vector<double> loss;  // per step, before the update
  int64_t skipped = 0;       // steps skipped by the loss scaler
};

// 50 AdamW steps of a 2-16-3 GELU MLP on 30 spiral points, as a user would write them.
Curve train_curve(Device dev, Precision p, int steps = 50) {
  const models::Spirals d = models::make_spirals(10, 3, 0.2f, 6);
  const Tensor x = d.x.to(dev), y = d.y.to(dev);
  MLP mlp(2, 16, 3, Activation::gelu, InitOptions{5, DType::f32, dev, 0.f});
  AdamW opt(decay_groups(mlp.parameters(), 0.01), 2e-2);
  const Autocast ac(p);
  std::unique_ptr<LossScaler> scaler;
  if (ac.policy().loss_scaling == LossScaling::dynamic) scaler = std::make_unique<LossScaler>();
  Curve c;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(ac.f32(mlp.forward(x, ac)), y);  // the loss in fp32
    c.loss.push_back(loss.item());
    if (scaler) {
      scaler->scale(loss).backward();
      scaler->step(opt);
    } else {
      loss.backward();
      opt.step();
    }
  }
  if (scaler) c.skipped = scaler->skipped_steps();
  return c;
}

void check_close_curves(const Curve& o0, const Curve& o2) {
  REQUIRE(o0.loss.size() == o2.loss.size());
  for (size_t i = 0; i < o0.loss.size(); ++i) {
    INFO("step " << i << ": O0 " << o0.loss[i] << ", low precision " << o2.loss[i]);
    CHECK(std::fabs(o2.loss[i] - o0.loss[i]) <= 0.02 * o0.loss[i]);
  }
  INFO("final: O0 " << o0.loss.back() << ", low precision " << o2.loss.back());
  CHECK(std::fabs(o2.loss.back() - o0.loss.back()) <= 0.01 * o0.loss.back());
  CHECK(o0.loss.back() < 0.85 * o0.loss.front());  // it did learn something
}

}  // namespace

TEST_CASE("precision: MLP under O2 and O2-fp16 on emu follows O0", "[precision][e2e][emu]") {
  const Device emu{DeviceType::emu, 0};
  const Curve o0 = train_curve(emu, Precision::O0);
  const Curve o2 = train_curve(emu, Precision::O2);
  const Curve fp16 = train_curve(emu, Precision::O2_fp16);
  check_close_curves(o0, o2);
  check_close_curves(o0, fp16);
  CHECK(fp16.skipped == 0);  // 2^16 fits this model's fp16 gradients
  // The forward really runs in the compute dtype on emu.
  MLP mlp(2, 16, 3, Activation::gelu, InitOptions{5, DType::f32, emu, 0.f});
  const Tensor x = Tensor::randn({4, 2}, 1).to(emu);
  CHECK(mlp.forward(x, Autocast(Precision::O2)).dtype() == DType::bf16);
  CHECK(mlp.forward(x, Autocast(Precision::O2_fp16)).dtype() == DType::f16);
  // Truly lower precision: the curves are close, not identical.
  CHECK(o2.loss.back() != o0.loss.back());
}

TEST_CASE("precision: MLP under O2 on cpu (bf16 rounding) follows O0", "[precision][e2e]") {
  const Curve o0 = train_curve(kCPU, Precision::O0);
  const Curve o2 = train_curve(kCPU, Precision::O2);
  const Curve fp16 = train_curve(kCPU, Precision::O2_fp16);
  check_close_curves(o0, o2);
  check_close_curves(o0, fp16);
  CHECK(o2.loss.back() != o0.loss.back());
  // O1 on the cpu is O0: bit for bit.
  CHECK(train_curve(kCPU, Precision::O1, 5).loss == std::vector<double>(o0.loss.begin(), o0.loss.begin() + 5));
}

TEST_CASE("precision: memory report gives 16 B/param for fp32 AdamW and 18 mixed", "[precision]") {
  const models::Spirals d = models::make_spirals(10, 3, 0.2f, 6);
  MLP mlp(2, 16, 3, Activation::gelu, InitOptions{5, DType::f32, kCPU, 0.f});
  AdamW opt(decay_groups(mlp.parameters(), 0.01), 2e-2);
  const MemoryReport before = memory_report(mlp, opt, Precision::O0);
  CHECK(before.params == 2 * 16 + 16 + 16 * 3 + 3);
  CHECK(before.grads == 0);  // nothing allocated yet
  CHECK(before.optimizer == 0);
  cross_entropy(mlp.forward(d.x), d.y).backward();
  opt.step();
  const MemoryReport r = memory_report(mlp, opt, Precision::O0);
  INFO(r.str());
  CHECK(r.per_param(r.weights) == 4.0);
  CHECK(r.per_param(r.grads) == 4.0);
  CHECK(r.per_param(r.optimizer) == 8.0);
  CHECK(r.master == 0);
  CHECK(r.per_param(r.total()) == 16.0);
  CHECK(r.counters > 0);
  CHECK(r.allocator.current_bytes >= r.total());  // those tensors are live in the allocator
  const MemoryReport m = memory_report(mlp, opt, Precision::O2);
  CHECK(m.per_param(m.weights) == 2.0);
  CHECK(m.per_param(m.master) == 4.0);
  CHECK(m.per_param(m.total()) == 18.0);
  CHECK_THAT(m.str(), Catch::Contains("18.00 B/param"));
}

// O1 switches cuBLASLt's f32 GEMMs on a cuda device to TF32, any other level
// back to fp32. The GpuContext is created without touching the GPU (its
// cuBLASLt handle is made on first use), so this runs in every CUDA build.
TEST_CASE("precision: O1 sets TF32 GEMMs on cuda, other levels fp32; cpu/emu untouched", "[precision]") {
#if defined(ENGINE_HAVE_CUDA)
  const Device cuda{DeviceType::cuda, 0};
  apply_precision(Precision::O1, cuda);
  CHECK(gpu_context(0).f32_gemm_mode == ComputeMode::tf32);
  apply_precision(Precision::O1, kCPU);  // not cuda: nothing changes
  CHECK(gpu_context(0).f32_gemm_mode == ComputeMode::tf32);
  apply_precision(Precision::O2, cuda);
  CHECK(gpu_context(0).f32_gemm_mode == ComputeMode::fp32);
  apply_precision(Precision::O1, Device{DeviceType::cuda, 1});
  CHECK(gpu_context(0).f32_gemm_mode == ComputeMode::fp32);  // per device
  CHECK(gpu_context(1).f32_gemm_mode == ComputeMode::tf32);
  apply_precision(Precision::O0, Device{DeviceType::cuda, 1});
#else
  CHECK_NOTHROW(apply_precision(Precision::O1, kCPU));
  CHECK_NOTHROW(apply_precision(Precision::O1, Device{DeviceType::emu, 0}));
#endif
  CHECK(precision_summary(Precision::O1, Device{DeviceType::emu, 0}).find("this is O0") != std::string::npos);
}
