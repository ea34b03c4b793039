// The MLP trained for a few steps on `dev` and on the cpu must agree: the
// whole training path (linear = GEMM + bias, GELU, fused cross-entropy,
// gradient accumulation, the fused AdamW) checked end to end against the
// reference. Used for the emu device (always) and the cuda device (when a GPU
// answers). Tolerances: fp32 with different summation orders (tiled GEMM vs
// OpenBLAS, block reductions vs serial loops): 1e-4 relative, 1e-5 absolute.
#pragma once
#include "engine/nn/layers.h"
#include "engine/optim/optimizer.h"
#include "models/mlp/spirals.h"
#include "tests/test_util.h"

namespace eng::test {

inline void check_mlp_matches_cpu(Device dev) {
  const models::Spirals d = models::make_spirals(12, 3, 0.2f, 6);
  MLP cpu_mlp(2, 24, 3, Activation::gelu, InitOptions{5, DType::f32, kCPU, 0.f});
  MLP dev_mlp(2, 24, 3, Activation::gelu, InitOptions{5, DType::f32, dev, 0.f});
  const Tensor x_dev = d.x.to(dev), y_dev = d.y.to(dev);
  AdamW cpu_opt(decay_groups(cpu_mlp.parameters(), 0.1), 1e-2);
  AdamW dev_opt(decay_groups(dev_mlp.parameters(), 0.1), 1e-2);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step << " on " << dev.str());
    Tensor lc = cross_entropy(cpu_mlp.forward(d.x), d.y);
    Tensor ld = cross_entropy(dev_mlp.forward(x_dev), y_dev);
    CHECK(ld.device() == dev);
    CHECK_CLOSE(values(ld.to(kCPU)), values(lc), 1e-5, 1e-4);
    cpu_opt.zero_grad();
    dev_opt.zero_grad();
    lc.backward();
    ld.backward();
    const auto pc = cpu_mlp.named_parameters(), pd = dev_mlp.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      INFO(pc[i].first);
      CHECK_CLOSE(values(pd[i].second.grad().to(kCPU)), values(pc[i].second.grad()), 1e-5, 1e-4);
    }
    cpu_opt.step();
    dev_opt.step();
  }
}

}  // namespace eng::test
