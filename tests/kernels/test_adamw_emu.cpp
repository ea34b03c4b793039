// kernels/cuda/adamw.cu under the emulator: the fused multi-tensor AdamW step
// against eng::AdamW on the cpu (kernels/cpu/optim.cpp), and the global
// gradient norm against the cpu grad_norm.
// Tolerances: AdamW fp32 1e-6 relative (+1e-7 absolute, for values that pass
// near 0): the kernel computes with the same fp32 constants in the same order
// as the cpu loop, so under the emulator the results are in fact identical;
// on a GPU nvcc may contract into FMAs, a few ulps. The norm is summed in fp32
// (per thread, then per block) where the cpu sums in double: 1e-5 relative.
#include <cmath>
#include <iterator>

#include "engine/optim/descriptors.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adamw.h"
#include "kernels/rng.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

// Parameters of awkward sizes, the last spanning several chunks of the kernel;
// two groups: decayed matrices and undecayed vectors.
struct Params {
  std::vector<Tensor> all;
  std::vector<ParamGroup> groups;
};

Params make_params(Device dev) {
  const Shape shapes[] = {{1}, {7}, {33}, {40, 25}, {2 * gpu::kMultiTensorChunk + 5}};
  Params ps;
  uint64_t seed = 100;
  for (const Shape& s : shapes) ps.all.push_back(Tensor::randn(s, seed++).to(dev).detach().set_requires_grad(true));
  ps.groups = {{{ps.all[3], ps.all[4], ps.all[1]}, 0.1, 1.0}, {{ps.all[0], ps.all[2]}, 0.0, 0.5}};
  return ps;
}

}  // namespace

TEST_CASE("emu adamw: 5 fused steps match eng::AdamW on the cpu", "[emu][kernels]") {
  Params cpu = make_params(kCPU), emu = make_params(kEmu);
  AdamW opt_cpu(cpu.groups, 1e-2, 0.9, 0.95, 1e-8), opt_emu(emu.groups, 1e-2, 0.9, 0.95, 1e-8);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < cpu.all.size(); ++i) {
      if (step == 2 && i == 2) {  // no gradient this step: skipped, its step count stays behind
        cpu.all[i].zero_grad();
        emu.all[i].zero_grad();
        continue;
      }
      const Tensor g = Tensor::randn(cpu.all[i].shape(), 1000 + 10 * uint64_t(step) + i, 0.5f);
      cpu.all[i].set_grad(g);
      emu.all[i].set_grad(g.to(kEmu).detach());
    }
    opt_cpu.step();
    opt_emu.step();
  }
  for (size_t i = 0; i < cpu.all.size(); ++i) {
    INFO("parameter " << i);
    CHECK(emu.all[i].device() == kEmu);
    CHECK_CLOSE(values(emu.all[i]), values(cpu.all[i]), 1e-7, 1e-6);
  }
  const auto s_cpu = opt_cpu.state(), s_emu = opt_emu.state();
  REQUIRE(s_cpu.size() == s_emu.size());
  for (size_t i = 0; i < s_cpu.size(); ++i) {
    INFO(s_cpu[i].first);
    CHECK(s_cpu[i].first == s_emu[i].first);
    CHECK_CLOSE(values(s_emu[i].second), values(s_cpu[i].second), 1e-7, 1e-6);
  }
}

TEST_CASE("emu adamw: the optional bf16 copy is the rounded fp32 result", "[emu][kernels]") {
  // The launcher directly, on the kernel test device (emu, or cuda where the
  // suite reruns on a GPU): buffers and descriptors in device memory.
  const int64_t sizes[] = {1, 7, 33, 1000, gpu::kMultiTensorChunk + 3};
  std::vector<Tensor> p, g, m, v, p16;
  std::vector<std::vector<float>> p_ref, m_ref, v_ref;
  std::vector<gpu::AdamWTensor> descs;
  int64_t chunks = 0;
  for (size_t k = 0; k < std::size(sizes); ++k) {
    const int64_t n = sizes[k];
    const Tensor hp = Tensor::randn({n}, 7 + k), hg = Tensor::randn({n}, 70 + k);
    const Tensor hm = Tensor::randn({n}, 700 + k, 0.1f), hv = Tensor::uniform({n}, 7000 + k, 0.f, 0.1f);
    p.push_back(hp.to(kEmu)), g.push_back(hg.to(kEmu)), m.push_back(hm.to(kEmu)), v.push_back(hv.to(kEmu));
    p16.push_back(Tensor::full({n}, NAN, DType::bf16, kEmu));  // NaN until written
    p_ref.push_back(hp.to_vector()), m_ref.push_back(hm.to_vector()), v_ref.push_back(hv.to_vector());
    const std::vector<float> gk = hg.to_vector();
    const double lr = 3e-3, wd = k % 2 ? 0.0 : 0.1, bc1 = 1 - std::pow(0.9, 3.0), bc2 = 1 - std::pow(0.999, 3.0);
    descs.push_back({p[k].data<float>(), g[k].data<float>(), m[k].data<float>(), v[k].data<float>(),
                     k == 1 ? nullptr : p16[k].data_ptr(), n, chunks, float(1 - lr * wd), float(lr / bc1),
                     float(std::sqrt(bc2)), 0.f});
    chunks += gpu::chunks_of(n);
    cpu::adamw_step(p_ref[k].data(), gk.data(), m_ref[k].data(), v_ref[k].data(), n, lr, 0.9, 0.999, 1e-8, wd, bc1,
                    bc2);
  }
  const Tensor d_desc = detail::upload_descriptors(descs, kEmu, nullptr);
  ENGINE_GPU_CALL(kEmu, adamw_multi_tensor, static_cast<const gpu::AdamWTensor*>(d_desc.data_ptr()), int(descs.size()),
                  chunks, 0.9f, 0.999f, 1e-8f, nullptr, nullptr);
  const auto doubles = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  for (size_t k = 0; k < std::size(sizes); ++k) {
    INFO("tensor " << k << " of " << sizes[k] << " elements");
    const std::vector<float> pk = p[k].to(kCPU).to_vector();
    CHECK_CLOSE(doubles(pk), doubles(p_ref[k]), 1e-7, 1e-6);
    CHECK_CLOSE(doubles(m[k].to(kCPU).to_vector()), doubles(m_ref[k]), 1e-7, 1e-6);
    CHECK_CLOSE(doubles(v[k].to(kCPU).to_vector()), doubles(v_ref[k]), 1e-7, 1e-6);
    const std::vector<float> copy = p16[k].to(kCPU).to(DType::f32).to_vector();
    bool copy_ok = true;
    for (size_t i = 0; i < pk.size(); ++i)  // tensor 1: no copy asked, NaN stays
      copy_ok &= k == 1 ? std::isnan(copy[i]) : copy[i] == bf16_to_float(float_to_bf16(pk[i]));
    CHECK(copy_ok);
  }
}

TEST_CASE("emu adamw and the sum of squares: views at unaligned addresses match the cpu", "[emu][kernels]") {
  // The kernels take 16-byte packs (8-byte for the bf16 copy) only where a
  // tensor's arrays are aligned: views that start 1-3 floats in, and a bf16
  // copy 1 value in beside aligned floats, go element by element, in one
  // launch with an aligned tensor. (The emulator traps a misaligned wide
  // access, as a GPU faults on one, so a wrong alignment test fails here.)
  struct View {
    int64_t floats, copy;  // elements before the view: of the fp32 arrays, of the bf16 copy
  };
  const View views[] = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {0, 1}};
  const int64_t n = gpu::kMultiTensorChunk + 39;  // a chunk's tail of 39: packs and 3 (or 7) left over
  std::vector<Tensor> p, g, m, v, p16;
  std::vector<std::vector<float>> p_ref, m_ref, v_ref;
  std::vector<gpu::AdamWTensor> descs;
  int64_t chunks = 0;
  const double lr = 3e-3, wd = 0.1, bc1 = 1 - std::pow(0.9, 2.0), bc2 = 1 - std::pow(0.999, 2.0);
  for (size_t k = 0; k < std::size(views); ++k) {
    const int64_t o = views[k].floats, oc = views[k].copy;
    const Tensor hp = Tensor::randn({n + o}, 17 + k), hg = Tensor::randn({n + o}, 170 + k);
    const Tensor hm = Tensor::randn({n + o}, 1700 + k, 0.1f), hv = Tensor::uniform({n + o}, 17000 + k, 0.f, 0.1f);
    p.push_back(hp.to(kEmu)), g.push_back(hg.to(kEmu)), m.push_back(hm.to(kEmu)), v.push_back(hv.to(kEmu));
    p16.push_back(Tensor::full({n + oc}, NAN, DType::bf16, kEmu));
    p_ref.push_back(hp.to_vector()), m_ref.push_back(hm.to_vector()), v_ref.push_back(hv.to_vector());
    const std::vector<float> gk = hg.to_vector();
    descs.push_back({p[k].data<float>() + o, g[k].data<float>() + o, m[k].data<float>() + o, v[k].data<float>() + o,
                     static_cast<uint16_t*>(p16[k].data_ptr()) + oc, n, chunks, float(1 - lr * wd), float(lr / bc1),
                     float(std::sqrt(bc2)), 0.f});
    chunks += gpu::chunks_of(n);
    cpu::adamw_step(p_ref[k].data() + o, gk.data() + o, m_ref[k].data() + o, v_ref[k].data() + o, n, lr, 0.9, 0.999,
                    1e-8, wd, bc1, bc2);
  }
  const Tensor d_desc = detail::upload_descriptors(descs, kEmu, nullptr);
  ENGINE_GPU_CALL(kEmu, adamw_multi_tensor, static_cast<const gpu::AdamWTensor*>(d_desc.data_ptr()), int(descs.size()),
                  chunks, 0.9f, 0.999f, 1e-8f, nullptr, nullptr);
  const auto doubles = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  for (size_t k = 0; k < std::size(views); ++k) {
    INFO("floats " << views[k].floats << " in, the copy " << views[k].copy << " in");
    const std::vector<float> pk = p[k].to(kCPU).to_vector();  // the elements before the view untouched
    CHECK_CLOSE(doubles(pk), doubles(p_ref[k]), 1e-7, 1e-6);
    CHECK_CLOSE(doubles(m[k].to(kCPU).to_vector()), doubles(m_ref[k]), 1e-7, 1e-6);
    CHECK_CLOSE(doubles(v[k].to(kCPU).to_vector()), doubles(v_ref[k]), 1e-7, 1e-6);
    const std::vector<float> copy = p16[k].to(kCPU).to(DType::f32).to_vector();
    bool copy_ok = true;  // NaN before the view, the rounded update in it
    for (int64_t i = 0; i < n + views[k].copy; ++i) {
      const int64_t j = i - views[k].copy + views[k].floats;
      copy_ok &= i < views[k].copy ? std::isnan(copy[size_t(i)])
                                   : copy[size_t(i)] == bf16_to_float(float_to_bf16(pk[size_t(j)]));
    }
    CHECK(copy_ok);
  }
  // The sum of squares of integers 1-3 in magnitude, exact in fp32 and bf16
  // (at most 9 n): a value dropped or counted twice moves it by at least 1.
  // One launch a view, so each sum is checked alone.
  for (DType t : {DType::f32, DType::bf16}) {
    for (const View& w : views) {
      INFO(dtype_name(t) << ", a view " << w.floats << " values in");
      std::vector<float> vals(size_t(n + w.floats));
      double want = 0;
      for (size_t i = 0; i < vals.size(); ++i) {
        vals[i] = float(int64_t(rng::bits(77 + uint64_t(w.floats), i) % 3) + 1) * (i % 2 ? -1.f : 1.f);
        if (int64_t(i) >= w.floats) want += double(vals[i]) * vals[i];
      }
      const Tensor x = on_emu(Tensor::from_vector(vals, {int64_t(vals.size())}), t);
      const size_t elem = t == DType::f32 ? 4 : 2;
      const std::vector<gpu::SumSquaresTensor> sq{
          {static_cast<const char*>(x.data_ptr()) + w.floats * int64_t(elem), n, 0, gpu::storage_of(t)}};
      const Tensor d_sq = detail::upload_descriptors(sq, kEmu, nullptr);
      Tensor scratch = Tensor::empty({gpu::kSumSquaresScratch}, DType::f32, kEmu);
      ENGINE_GPU_CALL(kEmu, sum_squares_multi_tensor, static_cast<const gpu::SumSquaresTensor*>(d_sq.data_ptr()), 1,
                      gpu::chunks_of(n), scratch.data<float>(), nullptr);
      CHECK(double(scratch.to(kCPU).to_vector()[0]) == want);
    }
  }
}

TEST_CASE("emu grad_norm and clip_grad_norm match the cpu", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    std::vector<Tensor> cpu_params, emu_params;
    uint64_t seed = 500;
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(33), int64_t(1000), gpu::kMultiTensorChunk * 3 + 1}) {
      const Tensor g = Tensor::randn({n}, seed++, 0.3f);
      Tensor pc = Tensor::zeros({n}).set_requires_grad(true), pe = Tensor::zeros({n}, t, kEmu).set_requires_grad(true);
      pc.set_grad(rounded(g, t));
      pe.set_grad(on_emu(g, t));
      cpu_params.push_back(pc);
      emu_params.push_back(pe);
    }
    emu_params.push_back(Tensor::zeros({5}, t, kEmu).set_requires_grad(true));  // no gradient: ignored
    const double ref = grad_norm(cpu_params);
    CHECK_CLOSE(std::vector<double>{grad_norm(emu_params)}, std::vector<double>{ref}, 0, 1e-5);
    CHECK(grad_norm(emu_params) == grad_norm(emu_params));  // deterministic: fixed reduction order
    const double before = clip_grad_norm(emu_params, 1.0);
    CHECK_CLOSE(std::vector<double>{before}, std::vector<double>{ref}, 0, 1e-5);
    clip_grad_norm(cpu_params, 1.0);
    for (size_t i = 0; i < cpu_params.size(); ++i) CHECK_EMU_CLOSE(emu_params[i].grad(), cpu_params[i].grad(), t);
    CHECK_CLOSE(std::vector<double>{grad_norm(emu_params)}, std::vector<double>{1.0}, 0, 2 * tol_for(t).rtol);
  }
  CHECK(grad_norm({Tensor::zeros({3}, DType::f32, kEmu).set_requires_grad(true)}) == 0.0);
}

// Clipping without a host round trip (clip_coef_kernel): clip_coefficient's
// {norm, factor} and AdamW::step(factor) on emu against the cpu's
// clip_grad_norm (which scales the gradients in place) and step(): clipping
// hard (max_norm 0.5), not at all (100), and measuring only (0). Norm to the
// fp32-vs-double summation tolerance above; the steps as the AdamW test.
TEST_CASE("emu clip_coefficient + AdamW::step(grad_scale) match cpu clip_grad_norm + step", "[emu][kernels]") {
  for (double max_norm : {0.5, 100.0, 0.0}) {
    INFO("max_norm " << max_norm);
    Params cpu = make_params(kCPU), emu = make_params(kEmu);
    AdamW opt_cpu(cpu.groups, 1e-2, 0.9, 0.95, 1e-8), opt_emu(emu.groups, 1e-2, 0.9, 0.95, 1e-8);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < cpu.all.size(); ++i) {
        const Tensor g = Tensor::randn(cpu.all[i].shape(), 2000 + 10 * uint64_t(step) + i, 0.5f);
        cpu.all[i].set_grad(g);
        emu.all[i].set_grad(g.to(kEmu).detach());
      }
      const double norm = clip_grad_norm(cpu.all, max_norm);
      opt_cpu.step();
      const Tensor nc = clip_coefficient(emu.all, max_norm);
      opt_emu.step(nc.slice(1, 2));
      const std::vector<double> got = values(nc);
      CHECK_CLOSE(std::vector<double>{got[0]}, std::vector<double>{norm}, 0.0, 1e-5);
      const double want_factor = max_norm > 0 && max_norm / (norm + 1e-6) < 1 ? max_norm / (norm + 1e-6) : 1.0;
      CHECK_CLOSE(std::vector<double>{got[1]}, std::vector<double>{want_factor}, 0.0, 1e-5);
      if (max_norm == 0.5) CHECK(got[1] < 1.0);  // the case really clips
    }
    for (size_t i = 0; i < cpu.all.size(); ++i) CHECK_CLOSE(values(emu.all[i]), values(cpu.all[i]), 1e-6, 1e-5);
  }
  CHECK_THROWS_WITH(clip_coefficient(make_params(kCPU).all, 1.0), Catch::Contains("no parameter has a gradient"));
}
