// kernels/cuda/adamw8bit.cu and kernels/cuda/adafactor.cu under the
// emulator against the cpu references (kernels/cpu/optim8bit.cpp,
// kernels/cpu/adafactor.cpp) through eng::AdamW8bit and eng::Adafactor.
// 8-bit: the same fp32 operations in the same order and an exact max, so the
// parameters, codes and absmaxes are identical (on a GPU, FMA contraction
// may move a code by one entry). Adafactor: the kernels sum in fp32 trees,
// the cpu in double: 1e-5 relative.
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>

#include "engine/optim/descriptors.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/adamw8bit.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

struct Params {
  std::vector<Tensor> all;
  std::vector<ParamGroup> groups;
};

// Odd sizes: under and over the 8-bit threshold (4096), partial quantization
// blocks, several element chunks, factored tensors of 2 and 3 dims, one
// with two slabs of rows and two tiles of columns, both partial (Adafactor's
// column partials).
Params make_params(Device dev) {
  const Shape shapes[] = {{7},       {4095},      {4096}, {40, 131}, {3, 5, 6}, {2 * gpu::kMultiTensorChunk + 5},
                          {300, 20}, {2, 70, 300}};
  Params ps;
  uint64_t seed = 300;
  for (const Shape& s : shapes)
    ps.all.push_back(Tensor::randn(s, seed++, 0.5f).to(dev).detach().set_requires_grad(true));
  ps.groups = {{{ps.all[3], ps.all[4], ps.all[6], ps.all[7]}, 0.1, 1.0},
               {{ps.all[0], ps.all[1], ps.all[2], ps.all[5]}, 0.0, 0.5}};
  return ps;
}

// 4 steps; at step 2 parameter 1 has no gradient (skipped, its count behind).
void run_steps(Params& cpu, Params& emu, Optimizer& oc, Optimizer& oe) {
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < cpu.all.size(); ++i) {
      if (step == 2 && i == 1) {
        cpu.all[i].zero_grad();
        emu.all[i].zero_grad();
        continue;
      }
      const Tensor g = Tensor::randn(cpu.all[i].shape(), 2000 + 10 * uint64_t(step) + i, 0.3f);
      cpu.all[i].set_grad(g);
      emu.all[i].set_grad(g.to(kEmu).detach());
    }
    oc.step();
    oe.step();
  }
}

void compare_state(const Optimizer& oc, const Optimizer& oe, double atol, double rtol) {
  const auto sc = oc.state(), se = oe.state();
  REQUIRE(sc.size() == se.size());
  for (size_t i = 0; i < sc.size(); ++i) {
    INFO(sc[i].first);
    CHECK(sc[i].first == se[i].first);
    CHECK(sc[i].second.dtype() == se[i].second.dtype());
    // A loose comparison lets an 8-bit code move by one entry (FMA contraction on a GPU).
    const double a = se[i].second.dtype() == DType::u8 && atol > 0 ? 1.0 : atol;
    CHECK_CLOSE(values(se[i].second), values(sc[i].second), a, rtol);
  }
}

// step(grad_scale) on a device scalar s equals step() on gradients scaled
// beforehand, fl(g x s), bit for bit: the kernels scale each gradient as they read it.
template <typename Make>
void check_grad_scale_step(Make make, uint64_t seed) {
  Params a = make_params(kEmu), b = make_params(kEmu);
  auto oa = make(a.groups), ob = make(b.groups);
  const Tensor s = Tensor::full({1}, 0.37, DType::f32, kEmu);
  for (size_t i = 0; i < a.all.size(); ++i) {
    const Tensor g = Tensor::randn(a.all[i].shape(), seed + i, 0.3f);
    a.all[i].set_grad(g.to(kEmu).detach());
    b.all[i].set_grad(scale(g, 0.37f).to(kEmu).detach());
  }
  oa->step(s);
  ob->step();
  for (size_t i = 0; i < a.all.size(); ++i) CHECK(values(a.all[i]) == values(b.all[i]));
}

}  // namespace

TEST_CASE("emu adamw8bit: the fused kernel matches the cpu reference bit for bit", "[emu][kernels]") {
  Params cpu = make_params(kCPU), emu = make_params(kEmu);
  AdamW8bit oc(cpu.groups, 1e-2, 0.9, 0.95, 1e-8), oe(emu.groups, 1e-2, 0.9, 0.95, 1e-8);
  run_steps(cpu, emu, oc, oe);
  // Bit for bit under the emulator; on a GPU (ENGINE_TEST_GPU_DEVICE=cuda)
  // nvcc contracts into FMAs: an H100 moved parameters by up to 1.2e-7 (an
  // ulp) and absmaxes and fp32 moments by a few ulps, no code. An
  // ENGINE_EMU_FMA build's emulator contracts as well.
  const bool exact = kKernelsRoundLikeCpu;
  for (size_t i = 0; i < cpu.all.size(); ++i) {
    INFO("parameter " << i);
    if (exact)
      CHECK(values(emu.all[i]) == values(cpu.all[i]));
    else
      CHECK_CLOSE(values(emu.all[i].to(kCPU)), values(cpu.all[i]), 1e-6, 1e-5);
  }
  if (exact)
    compare_state(oc, oe, 0, 0);
  else
    compare_state(oc, oe, 1e-7, 1e-5);
  // The quantized parameters keep 1-byte codes.
  int codes = 0;
  for (const auto& [name, t] : oe.state()) codes += t.dtype() == DType::u8 ? 1 : 0;
  CHECK(codes == 2 * 5);  // 4096, 40 x 131, 2 x 2048 + 5, 300 x 20, 2 x 70 x 300
}

TEST_CASE("emu adamw8bit: tensors at unaligned addresses, whole and partial blocks, match the cpu bit for bit",
          "[emu][kernels]") {
  // The launcher directly: a lane takes its 8 elements in wide loads only
  // where the tensor's pointers allow, so the element-by-element path runs
  // for views that start off 16 (floats) or 8 (codes) bytes, and for the
  // lanes a tensor's last block leaves partial.
  struct Case {
    int64_t n, float_off, code_off;
  };
  const Case cases[] = {{1000, 0, 0}, {300, 1, 0}, {4101, 0, 3}, {777, 2, 5}, {256, 3, 1}};
  const auto smap = cpu::dynamic_map(true), umap = cpu::dynamic_map(false);
  std::vector<float> maps(smap.begin(), smap.end());
  maps.insert(maps.end(), umap.begin(), umap.end());
  const Tensor d_maps = Tensor::from_vector(maps, {512}, DType::f32, kEmu);
  struct Bufs {
    Tensor p, g, m8, am, v8, av;
  };
  std::vector<Bufs> dev;
  std::vector<std::vector<float>> p_ref, am_ref, av_ref;
  std::vector<std::vector<uint8_t>> m_ref, v_ref;
  std::vector<gpu::Adam8bitTensor> descs;
  int64_t blocks = 0;
  uint64_t seed = 40;
  const cpu::Adam8bitScalars k{0.9f, 0.95f, 1e-8f, 0.999f, 2e-3f, 0.3f};
  for (const Case& c : cases) {
    const int64_t nb = gpu::quant_blocks(c.n), nf = c.n + c.float_off, nc = c.n + c.code_off;
    const Tensor p = Tensor::randn({nf}, seed++), g = Tensor::randn({nf}, seed++, 0.1f);
    const Tensor m8 = Tensor::uniform({nc}, seed++, 0.f, 255.f).to(DType::u8);
    const Tensor v8 = Tensor::uniform({nc}, seed++, 0.f, 255.f).to(DType::u8);
    const Tensor am = Tensor::uniform({nb}, seed++, 0.f, 0.01f), av = Tensor::uniform({nb}, seed++, 0.f, 1e-3f);
    Bufs b{p.to(kEmu), g.to(kEmu), m8.to(kEmu), am.to(kEmu), v8.to(kEmu), av.to(kEmu)};
    descs.push_back({b.p.data<float>() + c.float_off, b.g.data<float>() + c.float_off,
                     b.m8.data<uint8_t>() + c.code_off, b.am.data<float>(), b.v8.data<uint8_t>() + c.code_off,
                     b.av.data<float>(), c.n, blocks, k.decay, k.step_size, k.sqrt_bc2, 0.f});
    blocks += nb;
    dev.push_back(b);
    p_ref.push_back(p.to_vector()), am_ref.push_back(am.to_vector()), av_ref.push_back(av.to_vector());
    m_ref.push_back({m8.data<uint8_t>(), m8.data<uint8_t>() + nc});
    v_ref.push_back({v8.data<uint8_t>(), v8.data<uint8_t>() + nc});
    const std::vector<float> gv = g.to_vector();
    cpu::adamw8bit_step(p_ref.back().data() + c.float_off, gv.data() + c.float_off, m_ref.back().data() + c.code_off,
                        am_ref.back().data(), v_ref.back().data() + c.code_off, av_ref.back().data(), c.n, smap.data(),
                        umap.data(), k);
  }
  const Tensor d_desc = detail::upload_descriptors(descs, kEmu, nullptr);
  ENGINE_GPU_CALL(kEmu, adamw8bit_multi_tensor, static_cast<const gpu::Adam8bitTensor*>(d_desc.data_ptr()),
                  int(descs.size()), blocks, d_maps.data<float>(), k.beta1, k.beta2, k.eps, nullptr, nullptr);
  const auto doubles = [](const auto& x) { return std::vector<double>(x.begin(), x.end()); };
  for (size_t i = 0; i < std::size(cases); ++i) {
    INFO("tensor of " << cases[i].n << " elements, floats off by " << cases[i].float_off << ", codes by "
                      << cases[i].code_off);
    const Bufs& b = dev[i];
    const auto codes = [](const Tensor& t) {
      const Tensor h = t.to(kCPU);
      return std::vector<uint8_t>(h.data<uint8_t>(), h.data<uint8_t>() + h.numel());
    };
    if (kKernelsRoundLikeCpu) {  // the elements before a view's start untouched, as the rest
      CHECK(b.p.to(kCPU).to_vector() == p_ref[i]);
      CHECK(b.am.to(kCPU).to_vector() == am_ref[i]);
      CHECK(b.av.to(kCPU).to_vector() == av_ref[i]);
      CHECK(codes(b.m8) == m_ref[i]);
      CHECK(codes(b.v8) == v_ref[i]);
    } else {  // a GPU's FMA contraction: an ulp, a code by one entry
      CHECK_CLOSE(doubles(b.p.to(kCPU).to_vector()), doubles(p_ref[i]), 1e-6, 1e-5);
      CHECK_CLOSE(doubles(b.am.to(kCPU).to_vector()), doubles(am_ref[i]), 1e-7, 1e-5);
      CHECK_CLOSE(doubles(codes(b.m8)), doubles(m_ref[i]), 1.0, 0);
      CHECK_CLOSE(doubles(codes(b.v8)), doubles(v_ref[i]), 1.0, 0);
    }
  }
}

TEST_CASE("emu adamw8bit: step(grad_scale) equals a step on gradients scaled beforehand", "[emu][kernels]") {
  check_grad_scale_step([](const std::vector<ParamGroup>& g) { return std::make_unique<AdamW8bit>(g, 1e-2); }, 77);
}

TEST_CASE("emu adafactor: the seven kernels match the cpu reference in every mode", "[emu][kernels]") {
  AdafactorOptions external, relative, warmup;
  relative.relative_step = relative.scale_parameter = true, relative.beta1 = 0.9;
  warmup.relative_step = warmup.scale_parameter = warmup.warmup_init = true;
  for (const AdafactorOptions& o : {external, relative, warmup}) {
    INFO("relative_step " << o.relative_step << " beta1 " << o.beta1 << " warmup " << o.warmup_init);
    Params cpu = make_params(kCPU), emu = make_params(kEmu);
    Adafactor oc(cpu.groups, 1e-2, o), oe(emu.groups, 1e-2, o);
    run_steps(cpu, emu, oc, oe);
    for (size_t i = 0; i < cpu.all.size(); ++i) {
      INFO("parameter " << i);
      CHECK_CLOSE(values(emu.all[i]), values(cpu.all[i]), 1e-6, 1e-5);
    }
    compare_state(oc, oe, 1e-9, 1e-5);  // exp_avg ~ lr u ~ 1e-4, with cancellation
  }
}

TEST_CASE("emu adafactor: step(grad_scale) equals a step on gradients scaled beforehand", "[emu][kernels]") {
  check_grad_scale_step([](const std::vector<ParamGroup>& g) { return std::make_unique<Adafactor>(g, 1e-2); }, 88);
}
