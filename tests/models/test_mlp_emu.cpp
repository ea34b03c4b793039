// The MLP on the emu device (the hand-written CUDA kernels, emulated) gives
// the same loss and gradients as on the cpu (OpenBLAS and the reference
// loops), and a few AdamW steps keep the two in step: the whole training
// path (linear = GEMM + bias, GELU, fused cross-entropy, gradient
// accumulation, the fused AdamW) checked end to end against the reference.
// Tolerances: fp32 with different summation orders (tiled GEMM vs OpenBLAS,
// block reductions vs serial loops): 1e-4 relative, 1e-5 absolute.
#include "engine/nn/layers.h"
#include "engine/optim/optimizer.h"
#include "models/mlp/spirals.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("mlp: same loss, gradients and AdamW steps on cpu and emu", "[emu][e2e][mlp]") {
  const models::Spirals d = models::make_spirals(12, 3, 0.2f, 6);
  MLP cpu_mlp(2, 24, 3, Activation::gelu, InitOptions{5, DType::f32, kCPU, 0.f});
  MLP emu_mlp(2, 24, 3, Activation::gelu, InitOptions{5, DType::f32, kEmu, 0.f});
  const Tensor x_emu = d.x.to(kEmu), y_emu = d.y.to(kEmu);
  AdamW cpu_opt(decay_groups(cpu_mlp.parameters(), 0.1), 1e-2);
  AdamW emu_opt(decay_groups(emu_mlp.parameters(), 0.1), 1e-2);
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    Tensor lc = cross_entropy(cpu_mlp.forward(d.x), d.y);
    Tensor le = cross_entropy(emu_mlp.forward(x_emu), y_emu);
    CHECK_CLOSE(values(le.to(kCPU)), values(lc), 1e-5, 1e-4);
    cpu_opt.zero_grad();
    emu_opt.zero_grad();
    lc.backward();
    le.backward();
    const auto pc = cpu_mlp.named_parameters(), pe = emu_mlp.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      INFO(pc[i].first);
      CHECK_CLOSE(values(pe[i].second.grad().to(kCPU)), values(pc[i].second.grad()), 1e-5, 1e-4);
    }
    cpu_opt.step();
    emu_opt.step();
  }
}
