// The tensor-core attention (kernels/cuda/attention_mma.cu, forward, and
// attention_mma_backward.cu) against the cpu reference
// (kernels/cpu/attention.cpp, f32 on inputs rounded to the storage type) and
// a logsumexp computed here in double: out, lse, dq, dk, dv; bf16 and f16, head
// sizes 64 and 128, causal and not, T = 1 (one row), 17 (a ragged block),
// 64 (exactly one query block and key tile), 130 (three of each, the last
// with two rows), queries at an offset into longer keys (context
// parallelism), q, k, v read in place from one packed qkv, and scores near
// -128 (padded keys must stay masked where e^-lse overflows) with one key
// near +128 at the edge of a warp's causal mask (a mask one key off fails).
// Tolerances: the output is emu_check.h's for one rounding, doubled in
// absolute terms: P is rounded to the storage type before P V (as
// FlashAttention-2 does), an error of at most 2^-9 of max |v| in bf16; the
// logsumexp 1e-4 (fp32 scores of exact products, another order of sums).
// The gradients: tests/kernels/test_attention_emu.cpp gives the CUDA-core
// kernels 4x the output's (O read back rounded for D; dS = P (dP - D)
// cancels); here P and dS are also rounded to the storage type for the
// products dV = P^T dO, dQ = dS K, dK = dS^T Q (as FlashAttention-2 does),
// which adds a rounding per key: 6x in absolute terms (measured: bf16 dq up
// to 0.038 over 27k elements, f16 0.003, the 8x of their mantissas).
// Last, the engine's attention op: which kernels AttentionImpl::ours and
// ours_cuda_cores launch (the step profile's names), and that the two agree.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "engine/kernel_profile.h"

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/attention_mma.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

struct Shape {
  int64_t B, Tq, Tk, NH, HS, q_offset;
  bool causal, packed;
  bool far = false;  // every score near -128: q about 4, k about -4 (unpacked)
  int64_t hot = -1;  // with far: this key's row about +4 instead, so its scores are near +128
};

// c + x / 4, elementwise.
Tensor shifted(const Tensor& x, float c) {
  std::vector<float> v(x.data<float>(), x.data<float>() + x.numel());
  for (float& e : v) e = c + 0.25f * e;
  return Tensor::from_vector(v, x.shape());
}

void check(const Shape& s, DType t) {
  INFO(dtype_name(t) << " B " << s.B << " Tq " << s.Tq << " Tk " << s.Tk << " NH " << s.NH << " HS " << s.HS
                     << " q_offset " << s.q_offset << (s.causal ? " causal" : " none") << (s.packed ? " packed" : "")
                     << (s.far ? " far" : "") << (s.hot >= 0 ? " hot key " + std::to_string(s.hot) : ""));
  const int64_t C = s.NH * s.HS, ld = s.packed ? 3 * C : C;
  // Packed: one (B, T, 3C) tensor, q | k | v at column offsets 0, C, 2C (self-attention: Tq = Tk).
  Tensor raw_q = Tensor::randn({s.B * s.Tq * ld}, 41, 1.5f), raw_k = Tensor::randn({s.B * s.Tk * ld}, 42, 1.5f);
  const Tensor raw_v = Tensor::randn({s.B * s.Tk * ld}, 43, 1.5f);
  if (s.far) raw_q = shifted(raw_q, 4.f), raw_k = shifted(raw_k, -4.f);
  for (int64_t b = 0; s.hot >= 0 && b < s.B; ++b)
    for (int64_t c = 0; c < ld; ++c) raw_k.data<float>()[(b * s.Tk + s.hot) * ld + c] *= -1.f;
  const Tensor rq = rounded(raw_q, t), rk = s.packed ? rq : rounded(raw_k, t), rv = s.packed ? rq : rounded(raw_v, t);
  const int64_t ko = s.packed ? C : 0, vo = s.packed ? 2 * C : 0;
  Tensor ref = Tensor::zeros({s.B * s.Tq * C}), att = Tensor::zeros({s.B * s.NH * s.Tq * s.Tk});
  const cpu::AttentionMask cm = s.causal ? cpu::AttentionMask::causal : cpu::AttentionMask::none;
  cpu::attention_forward(rq.data<float>(), rk.data<float>() + ko, rv.data<float>() + vo, ref.data<float>(),
                         att.data<float>(), cpu::AttentionDims{s.B, s.Tq, s.Tk, s.NH, s.HS, s.q_offset, ld}, cm);
  // lse in double from the same rounded inputs.
  std::vector<double> lse_ref(size_t(s.B * s.NH * s.Tq));
  const float* q = rq.data<float>();
  const float* k = rk.data<float>() + ko;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h)
      for (int64_t i = 0; i < s.Tq; ++i) {
        std::vector<double> sc;
        for (int64_t j = 0; j < s.Tk && (!s.causal || j <= s.q_offset + i); ++j) {
          double dot = 0;
          for (int64_t d = 0; d < s.HS; ++d)
            dot += double(q[(b * s.Tq + i) * ld + h * s.HS + d]) * double(k[(b * s.Tk + j) * ld + h * s.HS + d]);
          sc.push_back(dot / std::sqrt(double(s.HS)));
        }
        double mx = -INFINITY, sum = 0;
        for (double x : sc) mx = std::max(mx, x);
        for (double x : sc) sum += std::exp(x - mx);
        lse_ref[size_t((b * s.NH + h) * s.Tq + i)] = mx + std::log(sum);
      }
  const Tensor dq = on_emu(raw_q, t), dk = s.packed ? dq : on_emu(raw_k, t), dv = s.packed ? dq : on_emu(raw_v, t);
  const size_t es = dtype_size(t);
  const auto* pq = static_cast<const unsigned char*>(dq.data_ptr());
  const auto* pk = static_cast<const unsigned char*>(dk.data_ptr()) + size_t(ko) * es;
  const auto* pv = static_cast<const unsigned char*>(dv.data_ptr()) + size_t(vo) * es;
  Tensor out = Tensor::zeros({s.B * s.Tq * C}, t, kEmu), lse = Tensor::zeros({s.B * s.NH * s.Tq}, DType::f32, kEmu);
  const gpu::AttentionDims d{s.B, s.Tq, s.Tk, s.NH, s.HS, s.q_offset, s.packed ? ld : 0};
  ENGINE_GPU_CALL(kEmu, attention_forward_mma, gpu::storage_of(t), pq, pk, pv, out.data_ptr(), lse.data<float>(), d,
                  s.causal ? gpu::AttentionMask::causal : gpu::AttentionMask::none, nullptr);
  const Tol tol = tol_for(t);
  CHECK_CLOSE(values(out.to(kCPU)), values(ref), 2 * tol.atol, tol.rtol);
  std::vector<double> got = values(lse.to(kCPU));
  CHECK_CLOSE(got, lse_ref, 1e-4, 1e-5);

  // The backward from the forward's out and lse; packed: one (B, T, 3C) gradient written in place.
  const Tensor raw_do = Tensor::randn({s.B * s.Tq * C}, 44);
  const Tensor rdo = rounded(raw_do, t);
  Tensor gq = Tensor::zeros({s.B * s.Tq * ld}), gk = Tensor::zeros({s.B * s.Tk * ld}),
         gv = Tensor::zeros({s.B * s.Tk * ld});
  float* gkp = s.packed ? gq.data<float>() + ko : gk.data<float>();
  float* gvp = s.packed ? gq.data<float>() + vo : gv.data<float>();
  cpu::attention_backward(rdo.data<float>(), rq.data<float>(), rk.data<float>() + ko, rv.data<float>() + vo,
                          att.data<float>(), gq.data<float>(), gkp, gvp,
                          cpu::AttentionDims{s.B, s.Tq, s.Tk, s.NH, s.HS, s.q_offset, ld}, cm);
  const Tensor ddo = on_emu(raw_do, t);
  Tensor eq = Tensor::zeros({s.B * s.Tq * ld}, t, kEmu), ek = Tensor::zeros({s.B * s.Tk * ld}, t, kEmu),
         ev = Tensor::zeros({s.B * s.Tk * ld}, t, kEmu), delta = Tensor::zeros({s.B * s.NH * s.Tq}, DType::f32, kEmu);
  auto* eqp = static_cast<unsigned char*>(eq.data_ptr());
  void* ekp = s.packed ? static_cast<void*>(eqp + size_t(ko) * es) : ek.data_ptr();
  void* evp = s.packed ? static_cast<void*>(eqp + size_t(vo) * es) : ev.data_ptr();
  ENGINE_GPU_CALL(kEmu, attention_backward_mma, gpu::storage_of(t), ddo.data_ptr(), pq, pk, pv, out.data_ptr(),
                  lse.data<float>(), delta.data<float>(), eqp, ekp, evp, d,
                  s.causal ? gpu::AttentionMask::causal : gpu::AttentionMask::none, nullptr);
  // Only the q, k, v columns of each row (packed: all three are in eq).
  const auto cols = [&](const Tensor& x, int64_t rows, int64_t off) {
    const std::vector<double> all = values(x.to(kCPU));
    std::vector<double> sel;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < C; ++c) sel.push_back(all[size_t(r * ld + off + c)]);
    return sel;
  };
  const double gatol = 6 * tol.atol, grtol = 4 * tol.rtol;
  CHECK_CLOSE(cols(eq, s.B * s.Tq, 0), cols(gq, s.B * s.Tq, 0), gatol, grtol);
  CHECK_CLOSE(cols(s.packed ? eq : ek, s.B * s.Tk, ko), cols(s.packed ? gq : gk, s.B * s.Tk, ko), gatol, grtol);
  CHECK_CLOSE(cols(s.packed ? eq : ev, s.B * s.Tk, vo), cols(s.packed ? gq : gv, s.B * s.Tk, vo), gatol, grtol);
}

}  // namespace

TEST_CASE("emu attention_mma: forward and backward, bf16 and f16, head sizes 64 and 128, causal and not",
          "[emu][kernels]") {
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t HS : {64, 128})
      for (bool causal : {true, false})
        for (int64_t T : {1, 17, 64, 130}) {
          if (HS == 128 && T == 130 && t == DType::f16) continue;  // the largest case once (bf16) is enough
          check({2, T, T, 2, HS, 0, causal, false}, t);
        }
}

TEST_CASE("emu attention_mma: queries at an offset, and a packed qkv read and written in place", "[emu][kernels]") {
  for (bool causal : {true, false}) {
    check({1, 40, 100, 2, 64, 60, causal, false}, DType::bf16);  // this rank's 40 queries of 100 keys
    // Offset 62: key 63 is the one score of warp 0's first key tile that
    // query 0 must not see (the per-warp mask tests' tightest case). Key 63
    // scores near +128 and every other near -128, so a mask that misses it
    // changes query 0's output entirely, and its backward P = e^256 is inf.
    check({1, 40, 102, 2, 64, 62, causal, false}, DType::bf16);
    check({1, 40, 102, 2, 64, 62, causal, false, true, 63}, DType::bf16);
    check({1, 40, 102, 2, 128, 62, causal, false, true, 63}, DType::bf16);
    check({2, 70, 70, 3, 64, 0, causal, true}, DType::bf16);
  }
}

TEST_CASE("emu attention_mma: refuses what it does not do, in one line", "[emu][kernels]") {
  const Tensor x = on_emu(Tensor::randn({4 * 32}, 1), DType::bf16);
  Tensor lse = Tensor::zeros({4}, DType::f32, kEmu);
  const auto call = [&](gpu::Storage st, int64_t HS) {
    const gpu::AttentionDims d{1, 4, 4, 1, HS, 0, 0};
    ENGINE_GPU_CALL(kEmu, attention_forward_mma, st, x.data_ptr(), x.data_ptr(), x.data_ptr(), x.data_ptr(),
                    lse.data<float>(), d, gpu::AttentionMask::causal, nullptr);
  };
  CHECK_THROWS_WITH(call(gpu::Storage::bf16, 32), Catch::Matchers::Contains("head size 32 (64 or 128)"));
  CHECK_THROWS_WITH(call(gpu::Storage::f32, 64), Catch::Matchers::Contains("bf16 or f16, not f32"));
}

namespace {

// The attention kernels one forward and backward of the op launched, and
// its output and input gradient (q's; packed: the whole dqkv).
struct OpRun {
  std::set<std::string> kernels;
  std::vector<double> out, grad;
};

OpRun run_op(DType t, int64_t HS, AttentionImpl impl, bool packed, int64_t q_offset = 0) {
  const int64_t B = 2, T = 19, NH = 2, C = NH * HS, Tq = T - q_offset;
  KernelProfile prof(kEmu);
  OpRun r;
  Tensor out, leaf;
  prof.start();
  if (packed) {
    leaf = on_emu(Tensor::randn({B, T, 3 * C}, 51, 1.5f), t).set_requires_grad(true);
    out = attention_qkv(leaf, NH, Causal::yes, impl);
  } else {
    leaf = on_emu(Tensor::randn({B, Tq, NH, HS}, 52, 1.5f), t).set_requires_grad(true);
    const Tensor k = on_emu(Tensor::randn({B, T, NH, HS}, 53, 1.5f), t);
    const Tensor v = on_emu(Tensor::randn({B, T, NH, HS}, 54), t);
    out = attention(leaf, k, v, Causal::yes, impl, q_offset);
  }
  out.backward(on_emu(Tensor::randn(out.shape(), 55), t));
  prof.stop();
  for (const KernelCall& c : prof.calls())
    if (c.name.find("attention") != std::string::npos) r.kernels.insert(c.name);
  r.out = values(out.to(kCPU));
  r.grad = values(leaf.grad().to(kCPU));
  return r;
}

}  // namespace

TEST_CASE("emu attention op: ours takes tensor cores in bf16/f16 at head size 64 and 128, CUDA cores otherwise",
          "[emu][kernels]") {
  const std::set<std::string> mma{"attention_forward_mma", "attention_backward_mma"},
      cores{"attention_forward", "attention_backward"};
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t HS : {64, 128})
      for (bool packed : {false, true}) {
        INFO(dtype_name(t) << " HS " << HS << (packed ? " packed qkv" : " q, k, v"));
        const OpRun tc = run_op(t, HS, AttentionImpl::ours, packed);
        const OpRun cc = run_op(t, HS, AttentionImpl::ours_cuda_cores, packed);
        CHECK(tc.kernels == mma);
        CHECK(cc.kernels == cores);
        // Both against the cpu reference elsewhere; here against each other
        // (the tensor-core tolerances above, as each is within its own of the reference).
        const Tol tol = tol_for(t);
        CHECK_CLOSE(tc.out, cc.out, 3 * tol.atol, tol.rtol);
        CHECK_CLOSE(tc.grad, cc.grad, 10 * tol.atol, 4 * tol.rtol);
      }
  // Context parallelism's slice of the queries goes to tensor cores too.
  CHECK(run_op(DType::bf16, 64, AttentionImpl::ours, false, 7).kernels == mma);
  // A gradient whose rows are not on 16 bytes: the forward on tensor cores, its backward on CUDA cores
  // (the same logsumexp), the gradient as the all-CUDA-core run gives it.
  {
    const eng::Shape s{2, 19, 2, 64};
    const int64_t n = 2 * 19 * 2 * 64;
    const auto grads = [&](AttentionImpl impl) {
      const Tensor q = on_emu(Tensor::randn(s, 56, 1.5f), DType::bf16).set_requires_grad(true);
      const Tensor k = on_emu(Tensor::randn(s, 57, 1.5f), DType::bf16);
      const Tensor v = on_emu(Tensor::randn(s, 58), DType::bf16);
      // One element in: the gradient starts 2 bytes past 16.
      const Tensor big = on_emu(Tensor::randn({n + 1}, 59), DType::bf16);
      const Tensor g = big.slice(1, n + 1).reshape(s);
      KernelProfile prof(kEmu);
      prof.start();
      attention(q, k, v, Causal::yes, impl).backward(g);
      prof.stop();
      std::set<std::string> names;
      for (const KernelCall& c : prof.calls())
        if (c.name.find("attention") != std::string::npos) names.insert(c.name);
      return std::pair{names, values(q.grad().to(kCPU))};
    };
    const auto [mixed_names, mixed] = grads(AttentionImpl::ours);
    CHECK(mixed_names == std::set<std::string>{"attention_forward_mma", "attention_backward"});
    const auto [cc_names, cc] = grads(AttentionImpl::ours_cuda_cores);
    const Tol tol = tol_for(DType::bf16);
    CHECK_CLOSE(mixed, cc, 10 * tol.atol, 4 * tol.rtol);
  }
  // What they do not take stays on CUDA cores: f32 (O0/O1), head size 32.
  CHECK(run_op(DType::f32, 64, AttentionImpl::ours, false).kernels == cores);
  CHECK(run_op(DType::bf16, 32, AttentionImpl::ours, true).kernels == cores);
}

TEST_CASE("attention impl names: ours, ours_cuda_cores, cudnn, and a one-line error", "[emu][kernels]") {
  for (AttentionImpl i : {AttentionImpl::ours, AttentionImpl::ours_cuda_cores, AttentionImpl::cudnn})
    CHECK(parse_attention_impl(attention_impl_name(i)) == i);
  CHECK_THROWS_WITH(parse_attention_impl("flash"), Catch::Matchers::Contains("ours, ours_cuda_cores or cudnn"));
}

// Scores near -128 put lse near -128, so 2^-lse overflows: a key past Tk in
// a ragged key tile (a zero row of K, a zero score) must be masked out of dS
// or the dQ products make inf times 0 = NaN; the unmasked tiles' exp2 of
// such scores must still match the cpu's exp.
// Not causal, so the causal mask does not hide the padded keys: head size 64
// (key tiles of 64 in dQ) and 128 (32: Tk 40 leaves 24 padded keys).
TEST_CASE("emu attention_mma: scores far below zero, with keys past Tk in a key tile", "[emu][kernels]") {
  for (bool causal : {true, false}) check({2, 17, 17, 2, 64, 0, causal, false, true}, DType::bf16);
  check({1, 40, 40, 2, 128, 0, false, false, true}, DType::bf16);
  check({1, 100, 100, 2, 64, 0, true, false, true}, DType::f16);
}
