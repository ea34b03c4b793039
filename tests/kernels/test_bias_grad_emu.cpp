// kernels/cuda/bias_grad.cu (a linear layer's bias gradient apart from its
// GEMM) under the emulator, and on cuda in gpu.kernel_suite, against the
// column sums in double of the same rounded values: the kernel's fp32 sums
// are what is checked, not a reference's. Rows 1, 37, 300 (three chunks of
// 100) and 4100 (33 chunks of 125, the last 100 rows: more items than the
// emulator's 4 blocks take in one pass); columns 1 and 5 (scalar), 8, 64
// and 520 (16-byte packs in every dtype), 100 (packs in f32, scalar in 16
// bits); the sums written in fp32 or in the storage type, or added to an
// fp32 gradient; an unaligned view (the scalar path); and the same bits
// again on a second run. Then linear's backward with the bias gradient
// apart (set_bias_grad_mode) against the default, the bias gradient in the
// dW GEMM's epilogue; and an MLP's with them fused: linear_gelu's from the
// GEMM that makes its gradient (cuBLASLt's DGELU_BGRAD on cuda; on emu the
// dgelu GEMM, then bias_grad over its output).
#include <algorithm>
#include <cmath>

#include "engine/kernel_profile.h"
#include "engine/nn/layers.h"
#include "engine/precision.h"
#include "kernels/cuda/bias_grad.h"
#include "tests/kernels/emu_check.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::test;

namespace {
// Puts back the bias gradient mode a test found (set_bias_grad_mode is process-wide).
struct RestoreBiasGradMode {
  BiasGradMode was = bias_grad_mode();
  RestoreBiasGradMode() = default;
  RestoreBiasGradMode(const RestoreBiasGradMode&) = delete;
  RestoreBiasGradMode& operator=(const RestoreBiasGradMode&) = delete;
  ~RestoreBiasGradMode() { set_bias_grad_mode(was); }
};

// Calls of a profile whose kernel name holds `part`.
int count(const KernelProfile& prof, const std::string& part) {
  int n = 0;
  for (const KernelCall& c : prof.calls()) n += c.name.find(part) != std::string::npos;
  return n;
}

// On cuda, a gradient fused against the epilogue's: cuBLASLt's algorithms
// may sum before they round and round an entry the other way, so the worst
// difference is held to 2^-7 of the largest entry (a row left out or counted
// twice moves an entry by about 1 in 25).
void check_within_largest(const std::vector<double>& f, const std::vector<double>& e) {
  REQUIRE(f.size() == e.size());
  double worst = 0, largest = 0;
  for (size_t j = 0; j < f.size(); ++j)
    worst = std::max(worst, std::abs(f[j] - e[j])), largest = std::max(largest, std::abs(e[j]));
  INFO("worst difference " << worst << ", largest entry " << largest);
  CHECK(worst <= 0x1p-7 * largest);
}

// Two runs' gradients of a parameter, both fp32 (the masters' under autocast).
std::pair<std::vector<double>, std::vector<double>> f32_grads(const Tensor& a, const Tensor& b) {
  REQUIRE(a.grad().dtype() == DType::f32);
  REQUIRE(b.grad().dtype() == DType::f32);
  return {values(a.grad().to(kCPU)), values(b.grad().to(kCPU))};
}

gpu::Storage storage(DType t) {
  return t == DType::f32 ? gpu::Storage::f32 : t == DType::bf16 ? gpu::Storage::bf16 : gpu::Storage::f16;
}

// db from g's rows, elements [offset, offset + rows cols) of a flat tensor
// in t; f32_out: db in fp32 (else t); add: onto an fp32 db holding `prior`.
std::vector<double> run_bias_grad(const Tensor& flat, int64_t offset, int64_t rows, int64_t cols, DType t, bool f32_out,
                                  bool add, const Tensor& prior) {
  const Tensor g = on_emu(flat, t).slice(offset, offset + rows * cols);
  Tensor db = add ? prior.to(kEmu).detach() : Tensor::empty({cols}, f32_out ? DType::f32 : t, kEmu);
  Tensor scratch = Tensor::empty({gpu::bias_grad_scratch_floats(rows, cols)}, DType::f32, kEmu);
  ENGINE_GPU_CALL(kEmu, bias_grad, storage(t), g.data_ptr(), rows, cols, scratch.data<float>(), db.data_ptr(), f32_out,
                  add, nullptr);
  return values(db.to(kCPU));
}

void check_bias_grad(int64_t rows, int64_t cols, DType t, bool f32_out, bool add, int64_t offset = 0) {
  INFO(dtype_name(t) << " rows " << rows << " cols " << cols << (f32_out ? " f32 out" : "") << (add ? " add" : "")
                     << " offset " << offset);
  const Tensor flat = Tensor::randn({offset + rows * cols}, uint64_t(rows * 131 + cols), 1.f);
  const Tensor prior = Tensor::randn({cols}, 5, 3.f);
  const std::vector<double> x = values(rounded(flat, t)), p = values(prior);
  std::vector<double> want(size_t(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) want[size_t(c)] += x[size_t(offset + r * cols + c)];
  if (add)
    for (int64_t c = 0; c < cols; ++c) want[size_t(c)] += p[size_t(c)];
  const std::vector<double> got = run_bias_grad(flat, offset, rows, cols, t, f32_out, add, prior);
  // fp32 sums of `rows` values near 1: a few ulps of the partial sums' size
  // (about sqrt(rows)); a 16-bit db adds its own rounding.
  const double atol = 1e-6 * std::sqrt(double(rows)) * 8 + (f32_out ? 0.0 : tol_for(t).atol);
  CHECK_CLOSE(got, want, atol, f32_out ? 1e-6 : tol_for(t).rtol);
  CHECK(run_bias_grad(flat, offset, rows, cols, t, f32_out, add, prior) == got);  // the same bits again
}
}  // namespace

TEST_CASE("emu bias_grad: column sums match the cpu's, written or added, packed or scalar", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t rows : {1, 37, 300})
      for (int64_t cols : {1, 5, 8, 64, 100, 520}) {
        check_bias_grad(rows, cols, t, true, false);
        check_bias_grad(rows, cols, t, false, false);  // db in the storage type
      }
  for (DType t : {DType::f32, DType::bf16}) {
    check_bias_grad(4100, 64, t, true, false);
    check_bias_grad(300, 64, t, true, true);     // onto an fp32 gradient (a later micro-batch)
    check_bias_grad(37, 64, t, true, false, 3);  // 3 elements in: not 16-byte aligned
  }
}

TEST_CASE("emu bias_grad: linear's backward with the bias gradient apart equals the GEMM epilogue's",
          "[emu][kernels]") {
  // Under autocast, two micro-batches: the weight's and the bias's fp32
  // gradients, the second added into the masters' (the bias by bias_grad
  // itself: no axpy_inplace), against the default (the dW GEMM's bias
  // gradient epilogue, then an add for the bias).
  const int64_t N = 300, C = 48, O = 40;
  const Tensor x0 = Tensor::randn({N, C}, 61), W0 = Tensor::randn({O, C}, 62, 0.2f), b0 = Tensor::randn({O}, 63);
  const Tensor g1 = Tensor::randn({N, O}, 64).to(DType::bf16).to(kEmu),
               g2 = Tensor::randn({N, O}, 65).to(DType::bf16).to(kEmu);
  const Autocast ac(Precision::O2);
  const RestoreBiasGradMode restore;
  auto run = [&](bool apart, KernelProfile* prof) {
    set_bias_grad_mode(apart ? BiasGradMode::apart : BiasGradMode::epilogue);
    // x needs no gradient: its own would be added by a pass after (a leaf's).
    const Tensor x = x0.to(kEmu);
    std::vector<Tensor> p{W0.to(kEmu).detach().set_requires_grad(true), b0.to(kEmu).detach().set_requires_grad(true)};
    auto fwd = [&] { return linear(ac.cast(x), ac.cast(p[0]), ac.cast(p[1])); };
    fwd().backward(g1);
    const Tensor y = fwd();
    if (prof) prof->start();
    y.backward(g2);
    if (prof) prof->stop();
    return p;
  };
  KernelProfile prof(kEmu);
  const std::vector<Tensor> apart = run(true, &prof), fused = run(false, nullptr);
  int bias_grads = 0, adds = 0, epilogues = 0;
  for (const KernelCall& c : prof.calls()) {
    bias_grads += c.name == "bias_grad";
    adds += c.name == "axpy_inplace";
    epilogues += c.name.find("+dbias") != std::string::npos;
  }
  CHECK(bias_grads == 1);
  CHECK(adds == 0);
  CHECK(epilogues == 0);
  // Both fp32 sums of the same bf16 values in other orders (the weight's,
  // on cuda, by another cuBLASLt algorithm): entries up to about 40, a few
  // ulps apart; a row left out or counted twice moves an entry by about 1.
  for (size_t i = 0; i < apart.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(apart[i].grad().dtype() == DType::f32);
    REQUIRE(fused[i].grad().dtype() == DType::f32);
    CHECK_CLOSE(values(apart[i].grad().to(kCPU)), values(fused[i].grad().to(kCPU)), 1e-4, 1e-5);
  }
}

TEST_CASE("emu bias_grad: an MLP's bias gradients fused equal the GEMM epilogue's", "[emu][kernels]") {
  // y = r + gelu(x W1^T + b1) W2^T + b2 under autocast (GPT-2's MLP):
  // fused, b1's gradient comes out of the GEMM that makes dp = gelu'(p) *
  // (g W2), in bf16 as cuBLASLt writes it, b2's from bias_grad, and no dW
  // GEMM has a bias-gradient epilogue; by default both from the dW GEMMs'.
  const int64_t N = 300, C = 40, H = 96;
  const Tensor x0 = Tensor::randn({N, C}, 71), W10 = Tensor::randn({H, C}, 72, 0.3f), b10 = Tensor::randn({H}, 73),
               W20 = Tensor::randn({C, H}, 74, 0.2f), b20 = Tensor::randn({C}, 75), r0 = Tensor::randn({N, C}, 76);
  const Tensor g0 = Tensor::randn({N, C}, 77).to(DType::bf16).to(kEmu);
  const Autocast ac(Precision::O2);
  const RestoreBiasGradMode restore;
  auto run = [&](BiasGradMode mode, KernelProfile& prof) {
    set_bias_grad_mode(mode);
    std::vector<Tensor> p;
    for (const Tensor& t : {W10, b10, W20, b20}) p.push_back(t.to(kEmu).detach().set_requires_grad(true));
    const Tensor h = linear_gelu(ac.cast(x0.to(kEmu)), ac.cast(p[0]), ac.cast(p[1]));
    const Tensor y = linear_residual(h, ac.cast(p[2]), ac.cast(p[3]), ac.cast(r0.to(kEmu)));
    prof.start();
    y.backward(g0);
    prof.stop();
    return p;
  };
  KernelProfile pf(kEmu), pe(kEmu);
  const std::vector<Tensor> fused = run(BiasGradMode::fused, pf), epi = run(BiasGradMode::epilogue, pe);
  // cuda: one GEMM sums dp's columns; emu: its dgelu GEMM, then bias_grad.
  const bool lt = kEmu.type == DeviceType::cuda;
  INFO("on cuda, a stderr note 'cuBLASLt has no DGELU_BGRAD' says the sums fell back to bias_grad");
  CHECK(count(pf, "+dgelu+dbias") == (lt ? 1 : 0));
  CHECK(count(pf, "bias_grad") == (lt ? 1 : 2));
  CHECK(count(pf, " +dbias") == 0);
  CHECK(count(pe, " +dbias") == 2);
  CHECK(count(pe, "bias_grad") == 0);
  // On emu, W1, W2, b2: fp32 sums of the same bf16 values in other orders;
  // b1: the same sums rounded once to bf16 (as cuBLASLt writes them, in D's
  // type), so within 2^-8 of the epilogue's fp32 sums. On cuda, DGELU_BGRAD
  // may sum dp before rounding it, and another algorithm may round an entry
  // of dp the other way (which the dW sums carry): there every parameter's
  // worst difference is held to 2^-7 of its largest entry (entries up to
  // about 25; a row of dp left out or counted twice moves one by about 1).
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("parameter " << i);
    const auto [f, e] = f32_grads(fused[i], epi[i]);
    if (lt)
      check_within_largest(f, e);
    else if (i == 1) {
      CHECK_CLOSE(f, e, 1e-3, 0x1p-8);
    } else {
      CHECK_CLOSE(f, e, 1e-4, 1e-5);
    }
  }
}

TEST_CASE("emu bias_grad: a pre-LN block's projection bias gradient from the next layernorm's backward",
          "[emu][kernels]") {
  // x1 = r + h W2^T + b2; x2 = x1 + gelu(layernorm(x1) W3^T + b3) W4^T + b4
  // (GPT-2's attention output, then its MLP) under autocast, two
  // micro-batches. x1's gradient is finished by the layernorm's backward,
  // which adds the residual's (x2's) in its kernel: fused, that kernel sums
  // its columns too, b2's gradient, and no bias_grad reads it again; b4's
  // (no layernorm finishes x2's gradient) from bias_grad, b3's from the
  // DGELU GEMM (cuda) or bias_grad after it (emu). Against the default, every
  // bias gradient from its dW GEMM's epilogue.
  const int64_t N = 300, C = 48, Hd = 32, F = 96;
  const Tensor h0 = Tensor::randn({N, Hd}, 91), r0 = Tensor::randn({N, C}, 92);
  const std::vector<Tensor> p0{Tensor::randn({C, Hd}, 93, 0.2f), Tensor::randn({C}, 94),
                               Tensor::randn({C}, 95),           Tensor::randn({C}, 96),
                               Tensor::randn({F, C}, 97, 0.2f),  Tensor::randn({F}, 98),
                               Tensor::randn({C, F}, 99, 0.2f),  Tensor::randn({C}, 100)};
  const Tensor g1 = Tensor::randn({N, C}, 101).to(DType::bf16).to(kEmu),
               g2 = Tensor::randn({N, C}, 102).to(DType::bf16).to(kEmu);
  const Autocast ac(Precision::O2);
  const RestoreBiasGradMode restore;
  std::vector<double> first_b3;  // b3's gradient after the first micro-batch
  auto run = [&](BiasGradMode mode, KernelProfile& prof) {
    set_bias_grad_mode(mode);
    std::vector<Tensor> p;
    for (const Tensor& t : p0) p.push_back(t.to(kEmu).detach().set_requires_grad(true));
    auto fwd = [&] {
      const Tensor x1 = linear_residual(ac.cast(h0.to(kEmu)), ac.cast(p[0]), ac.cast(p[1]), ac.cast(r0.to(kEmu)));
      const Tensor z = layernorm(x1, ac.cast(p[2]), ac.cast(p[3]));
      return linear_residual(linear_gelu(z, ac.cast(p[4]), ac.cast(p[5])), ac.cast(p[6]), ac.cast(p[7]), x1);
    };
    fwd().backward(g1);
    first_b3 = values(p[5].grad().to(kCPU));
    const Tensor x2 = fwd();
    prof.start();
    x2.backward(g2);  // the second micro-batch: b2's sums added into its master's gradient
    prof.stop();
    return p;
  };
  KernelProfile pf(kEmu), pe(kEmu);
  const std::vector<Tensor> fused = run(BiasGradMode::fused, pf), epi = run(BiasGradMode::epilogue, pe);
  const std::vector<double> epi_first_b3 = first_b3;
  const bool lt = kEmu.type == DeviceType::cuda;
  INFO("on cuda, a stderr note 'cuBLASLt has no DGELU_BGRAD' says b3's sums fell back to bias_grad");
  CHECK(count(pf, "bias_grad") == (lt ? 1 : 2));  // b4's (and b3's on emu): not b2's
  CHECK(count(pf, " +dbias") == 0);
  CHECK(count(pf, "fused_residual_layernorm_backward") == 1);
  CHECK(count(pe, " +dbias") == 3);
  CHECK(count(pe, "bias_grad") == 0);
  // b2: fp32 sums of x1's gradient as stored (bf16), the layernorm's by
  // block and lane, the epilogue's by the dW GEMM: the same values in
  // another order (entries up to about 40, a few ulps apart; a row left out
  // or counted twice moves one by about 1). b3: each micro-batch's sums
  // rounded once to bf16, half an ulp each: 2^-8 of the two micro-batches'
  // sums' magnitudes (the epilogue's, up to about 30, where the total may be
  // near 0). The rest as the MLP's test.
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("parameter " << i);
    const auto [f, e] = f32_grads(fused[i], epi[i]);
    if (lt)
      check_within_largest(f, e);
    else if (i == 5) {
      REQUIRE(epi_first_b3.size() == e.size());
      int bad = 0;
      for (size_t j = 0; j < e.size(); ++j) {
        const double s1 = epi_first_b3[j], s2 = e[j] - s1;
        bad += !(std::abs(f[j] - e[j]) <= 0x1p-8 * (std::abs(s1) + std::abs(s2)) * 1.01 + 1e-4);
      }
      CHECK(bad == 0);
    } else {
      CHECK_CLOSE(f, e, 1e-4, 1e-5);
    }
  }
}

TEST_CASE("bias gradient modes: names and a bad ENGINE_BIAS_GRAD's one-line error", "[ops]") {
  for (BiasGradMode m : {BiasGradMode::epilogue, BiasGradMode::apart, BiasGradMode::fused})
    CHECK(parse_bias_grad_mode(bias_grad_mode_name(m)) == m);
  CHECK_THROWS_WITH(parse_bias_grad_mode("fast"), Catch::Contains("ENGINE_BIAS_GRAD 'fast'") &&
                                                      Catch::Contains("epilogue") && Catch::Contains("fused"));
}

TEST_CASE("emu bias_grad: fused, a batched consumer of linear_gelu leaves its bias gradient apart", "[emu][kernels]") {
  // h (B, T, H) = linear_gelu(x), then a batched product h @ W (B, H, O):
  // its input-gradient GEMM applies GELU's derivative per batch, a batched
  // product whose columns no one GEMM sums; linear_gelu's bias gradient is
  // then bias_grad's over dp, as apart.
  const int64_t B = 3, T = 20, C = 16, H = 40, O = 24;
  const Tensor x0 = Tensor::randn({B, T, C}, 81), W10 = Tensor::randn({H, C}, 82, 0.3f), b10 = Tensor::randn({H}, 83),
               W20 = Tensor::randn({B, H, O}, 84, 0.2f);
  const Tensor g0 = Tensor::randn({B, T, O}, 85).to(DType::bf16).to(kEmu);
  const Autocast ac(Precision::O2);
  const RestoreBiasGradMode restore;
  auto run = [&](BiasGradMode mode) {
    set_bias_grad_mode(mode);
    std::vector<Tensor> p;
    for (const Tensor& t : {W10, b10, W20}) p.push_back(t.to(kEmu).detach().set_requires_grad(true));
    const Tensor h = linear_gelu(ac.cast(x0.to(kEmu)), ac.cast(p[0]), ac.cast(p[1]));
    matmul(h, ac.cast(p[2])).backward(g0);
    return p;
  };
  const std::vector<Tensor> fused = run(BiasGradMode::fused), epi = run(BiasGradMode::epilogue);
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("parameter " << i);
    CHECK_CLOSE(values(fused[i].grad().to(kCPU)), values(epi[i].grad().to(kCPU)), 1e-4, 1e-5);
  }
}
