// kernels/cuda/attention.cu (fused attention, FlashAttention-2 style, causal
// and unmasked) under the emulator against the cpu reference
// (kernels/cpu/attention.cpp), through the engine op attention with
// AttentionImpl::ours_cuda_cores (ours would put bf16/f16 at head size 64 on
// the tensor-core kernels: test_attention_mma_emu.cpp), forward and backward
// (dq, dk, dv).
// Shapes: B = 2, NH = 3 (B*NH > 1); T = 1 (one row), 5 (one ragged tile),
// 16 (exactly one tile of 16), 17 (a second tile with one row), 33 (three
// tiles, the last with one row); HS = 8, 16 and 24 (24 runs padded to 32,
// masked); HS = 64 (the unpadded real-model path) and 128 (the largest) at
// small T. Inputs std 1.5 so scores are spread out and the running max
// changes between key tiles. Causal::no walks every key tile, so in a ragged
// T the padded keys of the last tile are in every query tile's loop: T = 17
// and 33 check they get no probability, in the forward and both backward
// kernels. The reference obeys the flag too, so each unmasked case also
// checks that its output differs from the causal one (a kernel that ignored
// the flag would otherwise pass against a reference that ignored it too).
// Tolerances: f32 1e-5 abs/rel for the output and all three gradients (the
// online softmax and the per-tile sums add in another order than the
// reference's two-pass softmax and GEMMs; measured margin is comfortable).
// bf16/f16: the forward is emu_check.h's (one rounding of the output). The
// gradients get 4x that (bf16 3.2e-2, f16 4e-3): backward reads O as stored,
// i.e. rounded, for D = rowsum(dO * O), where the reference uses exact
// probabilities, and dS = P (dP - D) cancels when dP ~ D, so that one
// rounding reaches dq/dk as an absolute error of ~P * 2^-9 * |dO| |O| sqrt(HS)
// summed over the queries: measured up to 1.7e-2 on gradients of ~0.1 in
// bf16 (FlashAttention-2 has the same property: it also reads O in bf16).
#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

// Tk > T (with q_offset): the T queries at positions q_offset.. against Tk keys.
void check_attention(int64_t B, int64_t T, int64_t NH, int64_t HS, DType t, uint64_t seed, Causal causal = Causal::yes,
                     int64_t Tk = 0, int64_t q_offset = 0) {
  if (Tk == 0) Tk = T;
  INFO(dtype_name(t) << " B = " << B << " T = " << T << " NH = " << NH << " HS = " << HS << " Tk = " << Tk << " offset "
                     << q_offset << (causal == Causal::yes ? " causal" : " non-causal"));
  const Shape s{B, T, NH, HS}, sk{B, Tk, NH, HS};
  const Tensor q0 = Tensor::randn(s, seed, 1.5f), k0 = Tensor::randn(sk, seed + 1, 1.5f),
               v0 = Tensor::randn(sk, seed + 2), g0 = Tensor::randn(s, seed + 3);
  Tensor qr = rounded(q0, t).set_requires_grad(true), kr = rounded(k0, t).set_requires_grad(true),
         vr = rounded(v0, t).set_requires_grad(true);
  Tensor ref = attention(qr, kr, vr, causal, AttentionImpl::ours, q_offset);
  ref.backward(rounded(g0, t));
  Tensor qe = on_emu(q0, t).set_requires_grad(true), ke = on_emu(k0, t).set_requires_grad(true),
         ve = on_emu(v0, t).set_requires_grad(true);
  Tensor out = attention(qe, ke, ve, causal, AttentionImpl::ours_cuda_cores, q_offset);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == t);
  CHECK(out.shape() == s);
  out.backward(on_emu(g0, t));
  const Tol ft = tol_for(t);
  const double gtol = t == DType::f32 ? ft.rtol : 4 * ft.rtol;
  CHECK_CLOSE(values(out.to(kCPU)), values(ref), ft.atol, ft.rtol);
  CHECK_CLOSE(values(qe.grad().to(kCPU)), values(qr.grad()), gtol, gtol);
  CHECK_CLOSE(values(ke.grad().to(kCPU)), values(kr.grad()), gtol, gtol);
  CHECK_CLOSE(values(ve.grad().to(kCPU)), values(vr.grad()), gtol, gtol);
  if (causal == Causal::no && T > 1 && Tk == T) {
    NoGradGuard ng;
    const std::vector<double> masked = values(attention(qr, kr, vr, Causal::yes)), full = values(ref);
    double diff = 0;
    for (size_t x = 0; x < full.size(); ++x) diff = std::max(diff, std::fabs(full[x] - masked[x]));
    CHECK(diff > 0.1);  // query 0 alone sees one key when causal, T keys here
  }
}

}  // namespace

TEST_CASE("emu attention: f32 forward and backward match the cpu reference", "[emu][kernels]") {
  for (int64_t T : {1, 5, 16, 33})
    for (int64_t HS : {8, 16, 24}) check_attention(2, T, 3, HS, DType::f32, uint64_t(T * 100 + HS));
}

TEST_CASE("emu attention: bf16 and f16 storage with fp32 math", "[emu][kernels]") {
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t T : {1, 33}) check_attention(2, T, 3, 16, t, uint64_t(T * 10 + 7));
  check_attention(1, 20, 2, 8, DType::bf16, 3);
}

TEST_CASE("emu attention: real head sizes 64 and 128 at small T", "[emu][kernels]") {
  check_attention(1, 20, 2, 64, DType::f32, 11);
  check_attention(1, 20, 2, 64, DType::bf16, 12);
  check_attention(1, 17, 1, 128, DType::f32, 13);
}

TEST_CASE("emu attention: non-causal (every key tile, ragged last tile) matches the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t T : {1, 17, 33})
      for (int64_t HS : {8, 24, 64}) check_attention(2, T, 3, HS, t, uint64_t(T * 1000 + HS * 10 + 5), Causal::no);
}

// Context parallelism: Tq queries at positions off.. of Tk keys. The cpu
// reference is checked against those rows of self-attention and by finite
// differences (tests/ops/test_gradcheck.cpp); here the kernels' moved
// diagonal and ragged tiles on both sides: slices starting inside a
// tile (off 11, 22), on a tile edge (16), a short last slice (5 at 35), and
// a slice of one query.
TEST_CASE("emu attention: a slice of the queries at an offset against every key", "[emu][kernels]") {
  struct Case {
    int64_t Tq, Tk, off;
  };
  for (const Case& c :
       {Case{11, 33, 0}, Case{11, 33, 11}, Case{11, 33, 22}, Case{16, 48, 16}, Case{5, 40, 35}, Case{1, 20, 7}})
    for (Causal causal : {Causal::yes, Causal::no})
      for (DType t : {DType::f32, DType::bf16}) {
        if (t == DType::bf16 && c.Tq != 11) continue;
        check_attention(2, c.Tq, 3, 16, t, uint64_t(c.Tq * 131 + c.off * 7 + (causal == Causal::yes)), causal, c.Tk,
                        c.off);
      }
}

TEST_CASE("emu attention: the default is causal", "[emu][kernels]") {
  const Tensor q = on_emu(Tensor::randn({1, 20, 2, 8}, 21, 1.5f), DType::f32);
  const Tensor k = on_emu(Tensor::randn({1, 20, 2, 8}, 22, 1.5f), DType::f32);
  const Tensor v = on_emu(Tensor::randn({1, 20, 2, 8}, 23), DType::f32);
  CHECK(values(attention(q, k, v).to(kCPU)) == values(attention(q, k, v, Causal::yes).to(kCPU)));
}

TEST_CASE("emu attention: without grad mode nothing is saved, and bad head sizes are refused", "[emu][kernels]") {
  const Tensor q = on_emu(Tensor::randn({1, 3, 1, 8}, 1), DType::f32);
  {
    NoGradGuard ng;
    const Tensor qq = q.detach().set_requires_grad(true);
    CHECK(attention(qq, q, q).device() == kEmu);
  }
  const Tensor big = on_emu(Tensor::zeros({1, 2, 1, 129}), DType::f32);
  CHECK_THROWS_WITH(attention(big, big, big), Catch::Contains("head size 129 not supported"));
}
