// Attention forward on tensor cores, FlashAttention-2 style: the attention
// ladder's tensor-core rung (docs/kernels/attention.md). The same launcher
// contract as attention_forward (kernels/cuda/attention.h: layouts, packed
// qkv through ld_qkv, q_offset, lse), for bf16 and f16 storage and head
// sizes 64 and 128. Instructions: kernels/cuda/tensor_core.cuh.
//
// A block takes 64 queries of one (batch, head), four warps of 16 rows each.
// The Q tile comes in once (cp.async, then ldmatrix into registers: the A
// operand of every S = Q K^T); K and V come in 64 keys at a time through
// double-buffered cp.async, the next tile in flight while the warps work on
// this one. Per key tile a warp computes its 16 x 64 block of S on mma.sync
// (K as B straight from its [key][d] tile with ldmatrix), masks it where
// the tile crosses the warp's diagonal or Tk (causal: key > q_offset +
// query), folds it into the running row max m and sum l in base 2 (the
// online softmax: O and l are rescaled by 2^(m - m') when the max grows;
// p = 2^(scale log2e s - m), an FFMA and an ex2.approx a score), and
// multiplies P V on mma.sync with P taken from S's
// accumulators without leaving registers (an m16n8 accumulator pair is an
// m16n8k16 A fragment) and V as B through ldmatrix.trans. Causal blocks
// stop at the last key tile their queries see. At the end O / l is stored,
// and lse = m ln 2 + log l (m in base 2; lse of the scaled scores in
// natural units, as attention_forward saves it).
// bytes = each tensor once as attention_forward's cost counts it (q, k, v,
// out, lse), the K/V tiles re-read once per query block (caches); flops =
// 4 HS per visible (query, key) pair.
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention_mma.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
using namespace attn_mma;

// Causal at head size 64 (GPT-2's and Llama's): at most 128 registers, so
// on sm_90 four blocks fit an SM's registers as they fit its 228 KB of
// shared memory (ptxas would take 129-132 and fit three; sm_80's 164 KB hold
// three blocks either way). The cap costs no spill, and the spill check
// would say if it did.
template <typename T, int kHS, bool kCausal>
__global__ void __launch_bounds__(kThreads, kHS == 64 && kCausal ? 4 : 1)
    attention_forward_mma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                 T* __restrict__ out, float* __restrict__ lse, MmaDims a) {
  constexpr int kLd = kHS + kPad, kTile = kBc * kLd;
  DYNAMIC_SMEM(T, smem);
  T* const qs = smem;              // [kBr][kLd]
  T* const ks = smem + kBr * kLd;  // 2 stages of [kBc][kLd]
  T* const vs = ks + 2 * kTile;    // 2 stages of [kBc][kLd]
  const int q_tiles = (a.Tq + kBr - 1) / kBr;
  const int bh = int(blockIdx.x) / q_tiles, q0 = (int(blockIdx.x) % q_tiles) * kBr;
  const int b = bh / a.NH, h = bh % a.NH;
  const int64_t head = int64_t(h) * kHS;
  const T* qh = q + int64_t(b) * a.Tq * a.ld + head;
  const int64_t kv_head = int64_t(h / a.group) * kHS;  // grouped-query attention: the group's K/V head
  const T* kh = k + int64_t(b) * a.Tk * a.ldk + kv_head;
  const T* vh = v + int64_t(b) * a.Tk * a.ldk + kv_head;
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), g = lane / 4, t = lane % 4;

  // The key tiles these queries see: all, or up to the last query's diagonal.
  const int k_tiles = (a.Tk + kBc - 1) / kBc;
  const int last = kCausal ? min(k_tiles - 1, (a.q_off + q0 + kBr - 1) / kBc) : k_tiles - 1;
  load_rows<T, kHS>(qs, qh, a.ld, q0, kBr, a.Tq);
  load_rows<T, kHS>(ks, kh, a.ldk, 0, kBc, a.Tk);
  load_rows<T, kHS>(vs, vh, a.ldk, 0, kBc, a.Tk);
  tc::cp_async_commit();

  uint32_t qf[kHS / 16][4];                                // the warp's 16 query rows as A fragments, d in chunks of 16
  float o[kHS / 8][4] = {};                                // O, 16 x kHS: kHS / 8 accumulator tiles of 16 x 8
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g and g + 8 (l: this lane's share)
  const float sl2 = a.scale * kLog2e;                      // scale log2 e: scores to base-2 units
  for (int j = 0; j <= last; ++j) {
    if (j < last) {
      load_rows<T, kHS>(ks + ((j + 1) % 2) * kTile, kh, a.ldk, (j + 1) * kBc, kBc, a.Tk);
      load_rows<T, kHS>(vs + ((j + 1) % 2) * kTile, vh, a.ldk, (j + 1) * kBc, kBc, a.Tk);
      tc::cp_async_commit();
      tc::cp_async_wait_group<1>();
    } else {
      tc::cp_async_wait_group<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kc = 0; kc < kHS / 16; ++kc) a_frag(qf[kc], qs, kLd, warp * 16, kc * 16);
    }
    const T* kt = ks + (j % 2) * kTile;
    const T* vt = vs + (j % 2) * kTile;
    // S = Q K^T: 8 tiles of 16 x 8 keys.
    float s[kBc / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < kHS / 16; ++kc)
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t b0[2], b1[2];  // K as B: n = key, k = d, from the [key][d] tile
        b_frags_nk(b0, b1, kt, kLd, np * 16, kc * 16);
        tc::mma_m16n8k16<T>(s[2 * np], qf[kc], b0);
        tc::mma_m16n8k16<T>(s[2 * np + 1], qf[kc], b1);
      }
    // Mask, then the online softmax of rows g (i < 2) and g + 8 (i >= 2), in
    // base-2 units (m is the row's max of scale log2e S). Only tiles that
    // cross the warp's diagonal or Tk are masked: a warp-uniform test, and
    // most tiles skip the per-score index arithmetic.
    const int wq0 = q0 + warp * 16;  // the warp's first query
    if ((j + 1) * kBc > a.Tk || (kCausal && (j + 1) * kBc - 1 > a.q_off + wq0)) {
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int query = wq0 + g + 8 * (i >> 1), key = j * kBc + nt * 8 + 2 * t + (i & 1);
          if (key >= a.Tk || (kCausal && key > a.q_off + query)) s[nt][i] = -INFINITY;
        }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) mx[i >> 1] = fmaxf(mx[i >> 1], s[nt][i]);
    float alpha[2], ms[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));  // the row's 4 lanes
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r] * sl2);
      // A row that has seen no key yet keeps m = -inf; subtracting 0 instead
      // keeps its p = 2^-inf = 0 (not NaN), and alpha = 2^(-inf) = 0.
      ms[r] = m_new == -INFINITY ? 0.f : m_new;
      alpha[r] = exp2_approx(m[r] - ms[r]);
      m[r] = m_new;
      l[r] *= alpha[r];
    }
    // s becomes P, which never leaves the registers: accumulator tiles 2kc
    // and 2kc + 1 are the A fragment of P's keys 16kc..16kc+15.
    uint32_t pf[kBc / 16][4];
#pragma unroll
    for (int kc = 0; kc < kBc / 16; ++kc) {
#pragma unroll
      for (int nt = 2 * kc; nt < 2 * kc + 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[nt][i] = exp2_approx(fmaf(s[nt][i], sl2, -ms[i >> 1]));
          l[i >> 1] += s[nt][i];
        }
      acc_to_a<T>(pf[kc], s[2 * kc], s[2 * kc + 1]);
    }
#pragma unroll
    for (int dt = 0; dt < kHS / 8; ++dt)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[dt][i] *= alpha[i >> 1];
        // O += P V: V as B (k = key, n = d) from its [key][d] tile, transposed by ldmatrix.
#pragma unroll
    for (int kc = 0; kc < kBc / 16; ++kc)
#pragma unroll
      for (int dp = 0; dp < kHS / 16; ++dp) {
        uint32_t b0[2], b1[2];  // V as B: k = key, n = d, from the [key][d] tile
        b_frags_kn(b0, b1, vt, kLd, dp * 16, kc * 16);
        tc::mma_m16n8k16<T>(o[2 * dp], pf[kc], b0);
        tc::mma_m16n8k16<T>(o[2 * dp + 1], pf[kc], b1);
      }
    __syncthreads();  // this stage is refilled by tile j + 2's copies
  }
  // l: the row's four lanes' shares; O / l and the logsumexp, for rows inside Tq.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int query = q0 + warp * 16 + g + 8 * r;
    if (query >= a.Tq) continue;
    const float inv = 1.f / l[r];
    T* orow = out + (int64_t(b) * a.Tq + query) * (int64_t(a.NH) * kHS) + head;
#pragma unroll
    for (int dt = 0; dt < kHS / 8; ++dt) {
      orow[dt * 8 + 2 * t] = from_f32<T>(o[dt][2 * r] * inv);
      orow[dt * 8 + 2 * t + 1] = from_f32<T>(o[dt][2 * r + 1] * inv);
    }
    if (t == 0) lse[int64_t(bh) * a.Tq + query] = m[r] * kLn2 + logf(l[r]);  // back to natural units
  }
}

template <typename T, int kHS, bool kCausal>
void launch(const T* q, const T* k, const T* v, T* out, float* lse, const MmaDims& a, void* stream) {
  const size_t smem = size_t(kBr + 4 * kBc) * size_t(kHS + kPad) * sizeof(T);
  const unsigned grid = unsigned(a.BH) * unsigned((a.Tq + kBr - 1) / kBr);
  gpu::allow_dynamic_smem<attention_forward_mma_kernel<T, kHS, kCausal>>(smem);
  LAUNCH_KERNEL((attention_forward_mma_kernel<T, kHS, kCausal>), grid, kThreads, smem, as_stream(stream), q, k, v, out,
                lse, a);
}
}  // namespace

void attention_forward_mma(gpu::Storage st, const void* q, const void* k, const void* v, void* out, float* lse,
                           const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream) {
  ENGINE_CHECK(st != gpu::Storage::f32, "attention_forward_mma: tensor cores take bf16 or f16, not f32");
  ENGINE_CHECK(d.HS == 64 || d.HS == 128, "attention_forward_mma: head size ", d.HS, " (64 or 128)");
  ENGINE_CHECK(d.NKV >= 0 && d.NH % (d.NKV ? d.NKV : d.NH) == 0, "attention_forward_mma: ", d.NKV,
               " K/V heads do not divide ", d.NH, " query heads");
  const MmaDims a = mma_dims(d);
  ENGINE_CHECK(a.ld % 8 == 0 && a.ldk % 8 == 0 && aligned16(q, k, v),
               "attention_forward_mma: q, k, v rows must start on 16 bytes");
  ENGINE_CHECK(d.B * d.NH * ((d.Tq + kBr - 1) / kBr) < (int64_t(1) << 31) && d.Tk < (int64_t(1) << 30),
               "attention_forward_mma: ", d.B, " x ", d.NH, " heads of ", d.Tq, " queries is too large a grid");
  if (d.B * d.Tq * d.NH == 0) return;
  const bool causal = mask == gpu::AttentionMask::causal;
  dispatch_storage(st, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, float>) {
      const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
      T* po = static_cast<T*>(out);
      if (d.HS == 64)
        causal ? launch<T, 64, true>(pq, pk, pv, po, lse, a, stream)
               : launch<T, 64, false>(pq, pk, pv, po, lse, a, stream);
      else
        causal ? launch<T, 128, true>(pq, pk, pv, po, lse, a, stream)
               : launch<T, 128, false>(pq, pk, pv, po, lse, a, stream);
    }
  });
}

}  // namespace eng::ENGINE_GPU_NS
