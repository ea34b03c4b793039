// Attention backward on tensor cores, FlashAttention-2 style: the backward of
// attention_mma.cu, with attention_backward's contract (kernels/cuda/
// attention.h: layouts, ld_qkv, q_offset, the forward's lse, delta as
// scratch), bf16 and f16, head sizes 64 and 128. With S = scale Q K^T and
// P = exp(S - lse) (computed as 2^(log2e S - log2e lse): an FFMA and an
// ex2.approx, exp2.cuh's exp2_approx):
//   D = rowsum(dO * O),  dP = dO V^T,  dS = P * (dP - D),
//   dV = P^T dO,  dK = scale dS^T Q,  dQ = scale dS K.
// Three kernels, none with atomics, so dQ, dK and dV are the same bits on
// every run (FlashAttention-2 adds dQ with fp32 atomics instead, saving the
// second recomputation of S and dP):
//   attention_delta_kernel      D, a warp a row (attention_delta.cuh, as the CUDA-core backward);
//   attention_mma_dkdv_kernel   a block a 64-key tile (four warps of 16 keys),
//       K and V in shared memory, walking the query tiles that see it (Q, dO,
//       lse and D double-buffered through cp.async): S^T = K Q^T and
//       dP^T = V dO^T on mma.sync, P^T and dS^T in the accumulators, which
//       are the A fragments of dV += P^T dO and dK += dS^T Q;
//   attention_mma_dq_kernel     a block a 64-query tile, walking the key
//       tiles it sees: S = Q K^T, dP = dO V^T, dS, and dQ += dS K.
// Operands come from shared memory through ldmatrix when needed (not kept in
// registers), and the inner tiles of head size 128 are narrower, so no kernel
// spills (attention_mma.cuh has the loaders and fragment helpers).
// bytes = attention_backward's cost (each tensor once); flops = 10 HS per
// visible (query, key) pair counted as FlashAttention does (S twice, dP
// twice, dV, dK, dQ: 14 HS executed).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention_delta.cuh"
#include "kernels/cuda/attention_mma.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
using namespace attn_mma;

// Inner tiles: keys a step of the dQ kernel, queries a step of the dK/dV kernel.
template <int kHS>
constexpr int kInnerKeys = kHS == 128 ? 32 : 64;
template <int kHS>
constexpr int kInnerQueries = kHS == 128 ? 16 : 32;

template <typename T, int kHS, bool kCausal>
__global__ void __launch_bounds__(kThreads)
    attention_mma_dkdv_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                              const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                              T* __restrict__ dk, T* __restrict__ dv, MmaDims a) {
  constexpr int kLd = kHS + kPad, kBq = kInnerQueries<kHS>, kTile = kBq * kLd;
  DYNAMIC_SMEM(T, smem);
  T* const ks = smem;                                              // [64][kLd]
  T* const vs = ks + kBc * kLd;                                    // [64][kLd]
  T* const qs = vs + kBc * kLd;                                    // 2 stages of [kBq][kLd]
  T* const dos = qs + 2 * kTile;                                   // 2 stages of [kBq][kLd]
  float* const stats = reinterpret_cast<float*>(dos + 2 * kTile);  // 2 stages of lse[kBq], D[kBq]
  const int k_tiles = (a.Tk + kBc - 1) / kBc;
  const int bkv = int(blockIdx.x) / k_tiles, k0 = (int(blockIdx.x) % k_tiles) * kBc;
  const int NKV = a.NH / a.group, b = bkv / NKV, kvh = bkv % NKV;
  const int64_t kv_head = int64_t(kvh) * kHS, o_ld = int64_t(a.NH) * kHS;
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), g = lane / 4, t = lane % 4;
  // The query tiles that see these keys: from the first whose last query
  // reaches k0, for each query head of the K/V head's group in turn (steps
  // of the pipeline: span tiles a head).
  const int q_tiles = (a.Tq + kBq - 1) / kBq;
  const int first = kCausal ? max(0, (k0 - a.q_off) / kBq) : 0;
  const int span = q_tiles - first, steps = span > 0 ? span * a.group : 0;
  // Step s is query tile first + s % span of the group's query head s / span
  // (b, h0 + s / span): its rows and statistics start hg = s / span heads
  // past the group's first. The loop walks (hg, i) forward, no division.
  const int64_t h0 = int64_t(kvh) * a.group;
  const auto load_queries = [&](int stage, int hg, int i) {
    const int64_t head = (h0 + hg) * kHS, stat = (int64_t(b) * a.NH + h0 + hg) * a.Tq;
    load_rows<T, kHS>(qs + stage * kTile, q + int64_t(b) * a.Tq * a.ld + head, a.ld, i * kBq, kBq, a.Tq);
    load_rows<T, kHS>(dos + stage * kTile, dout + int64_t(b) * a.Tq * o_ld + head, o_ld, i * kBq, kBq, a.Tq);
    for (int x = int(threadIdx.x); x < kBq; x += kThreads) {
      const int query = i * kBq + x;                                                      // past Tq: P = 2^-inf = 0
      stats[stage * 2 * kBq + x] = query < a.Tq ? lse[stat + query] * kLog2e : INFINITY;  // base-2 units
      stats[stage * 2 * kBq + kBq + x] = query < a.Tq ? delta[stat + query] : 0.f;
    }
  };
  load_rows<T, kHS>(ks, k + int64_t(b) * a.Tk * a.ldk + kv_head, a.ldk, k0, kBc, a.Tk);
  load_rows<T, kHS>(vs, v + int64_t(b) * a.Tk * a.ldk + kv_head, a.ldk, k0, kBc, a.Tk);
  if (steps > 0) load_queries(0, 0, first);
  tc::cp_async_commit();

  float dkacc[kHS / 8][4] = {}, dvacc[kHS / 8][4] = {};
  const float sl2 = a.scale * kLog2e;  // P = 2^(scale log2e S - lse log2e)
  int i = first, hg = 0;               // this step's query tile, and its head in the group
  for (int step = 0; step < steps; ++step) {
    const int stage = step % 2;
    const bool wrap = i + 1 == q_tiles;  // the next step starts the group's next head
    const int i_next = wrap ? first : i + 1, hg_next = hg + (wrap ? 1 : 0);
    if (step + 1 < steps) {
      load_queries(1 - stage, hg_next, i_next);
      tc::cp_async_commit();
      tc::cp_async_wait_group<1>();
    } else {
      tc::cp_async_wait_group<0>();
    }
    __syncthreads();
    const T* qt = qs + stage * kTile;
    const T* dot = dos + stage * kTile;
    const float* lse_s = stats + stage * 2 * kBq;
    const float* d_s = lse_s + kBq;
    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys: kBq / 8 tiles of 16 x 8 queries.
    float st[kBq / 8][4] = {}, dpt[kBq / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < kHS / 16; ++kc) {
      uint32_t ka[4], va[4];
      a_frag(ka, ks, kLd, warp * 16, kc * 16);
      a_frag(va, vs, kLd, warp * 16, kc * 16);
#pragma unroll
      for (int np = 0; np < kBq / 16; ++np) {
        uint32_t b0[2], b1[2];
        b_frags_nk(b0, b1, qt, kLd, np * 16, kc * 16);  // Q as B: n = query, k = d
        tc::mma_m16n8k16<T>(st[2 * np], ka, b0);
        tc::mma_m16n8k16<T>(st[2 * np + 1], ka, b1);
        b_frags_nk(b0, b1, dot, kLd, np * 16, kc * 16);  // dO as B
        tc::mma_m16n8k16<T>(dpt[2 * np], va, b0);
        tc::mma_m16n8k16<T>(dpt[2 * np + 1], va, b1);
      }
    }
    // P^T into st, dS^T = P^T (dP^T - D) into dpt. Masked only where the
    // warp's 16 keys cross the query tile's diagonal (warp-uniform). A key
    // past Tk is a row of the accumulators that is never stored, and a query
    // past Tq has lse = inf, so P = 0: neither needs a mask.
    const int wk0 = k0 + warp * 16;  // the warp's first key
    const bool masked = kCausal && wk0 + 15 > a.q_off + i * kBq;
#pragma unroll
    for (int nt = 0; nt < kBq / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        float p = exp2_approx(fmaf(st[nt][e], sl2, -lse_s[col]));
        if (masked && wk0 + g + 8 * (e >> 1) > a.q_off + i * kBq + col) p = 0.f;
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - d_s[col]);
      }
      // dV += P^T dO, dK += dS^T Q: the accumulators as A, k = query; dO and Q as B (k = query, n = d).
#pragma unroll
    for (int kc = 0; kc < kBq / 16; ++kc) {
      uint32_t pa[4], dsa[4];
      acc_to_a<T>(pa, st[2 * kc], st[2 * kc + 1]);
      acc_to_a<T>(dsa, dpt[2 * kc], dpt[2 * kc + 1]);
#pragma unroll
      for (int dp = 0; dp < kHS / 16; ++dp) {
        uint32_t b0[2], b1[2];
        b_frags_kn(b0, b1, dot, kLd, dp * 16, kc * 16);
        tc::mma_m16n8k16<T>(dvacc[2 * dp], pa, b0);
        tc::mma_m16n8k16<T>(dvacc[2 * dp + 1], pa, b1);
        b_frags_kn(b0, b1, qt, kLd, dp * 16, kc * 16);
        tc::mma_m16n8k16<T>(dkacc[2 * dp], dsa, b0);
        tc::mma_m16n8k16<T>(dkacc[2 * dp + 1], dsa, b1);
      }
    }
    __syncthreads();  // this stage is refilled by step + 2
    i = i_next, hg = hg_next;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = k0 + warp * 16 + g + 8 * r;
    if (key >= a.Tk) continue;
    const int64_t off = (int64_t(b) * a.Tk + key) * a.ldk + kv_head;
#pragma unroll
    for (int dt = 0; dt < kHS / 8; ++dt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        dk[off + dt * 8 + 2 * t + c] = from_f32<T>(dkacc[dt][2 * r + c] * a.scale);
        dv[off + dt * 8 + 2 * t + c] = from_f32<T>(dvacc[dt][2 * r + c]);
      }
  }
}

template <typename T, int kHS, bool kCausal>
__global__ void __launch_bounds__(kThreads)
    attention_mma_dq_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                            const T* __restrict__ v, const float* __restrict__ lse, const float* __restrict__ delta,
                            T* __restrict__ dq, MmaDims a) {
  constexpr int kLd = kHS + kPad, kBk = kInnerKeys<kHS>, kTile = kBk * kLd;
  DYNAMIC_SMEM(T, smem);
  T* const qs = smem;             // [64][kLd]
  T* const dos = qs + kBr * kLd;  // [64][kLd]
  T* const ks = dos + kBr * kLd;  // 2 stages of [kBk][kLd]
  T* const vs = ks + 2 * kTile;   // 2 stages of [kBk][kLd]
  const int q_tiles = (a.Tq + kBr - 1) / kBr;
  const int bh = int(blockIdx.x) / q_tiles, q0 = (int(blockIdx.x) % q_tiles) * kBr;
  const int b = bh / a.NH, h = bh % a.NH;
  const int64_t head = int64_t(h) * kHS, o_ld = int64_t(a.NH) * kHS;
  const int64_t kv_head = int64_t(h / a.group) * kHS;  // grouped-query attention: the group's K/V head
  const T* kh = k + int64_t(b) * a.Tk * a.ldk + kv_head;
  const T* vh = v + int64_t(b) * a.Tk * a.ldk + kv_head;
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), g = lane / 4, t = lane % 4;
  const int k_tiles = (a.Tk + kBk - 1) / kBk;
  const int last = kCausal ? min(k_tiles - 1, (a.q_off + q0 + kBr - 1) / kBk) : k_tiles - 1;
  load_rows<T, kHS>(qs, q + int64_t(b) * a.Tq * a.ld + head, a.ld, q0, kBr, a.Tq);
  load_rows<T, kHS>(dos, dout + int64_t(b) * a.Tq * o_ld + head, o_ld, q0, kBr, a.Tq);
  load_rows<T, kHS>(ks, kh, a.ldk, 0, kBk, a.Tk);
  load_rows<T, kHS>(vs, vh, a.ldk, 0, kBk, a.Tk);
  tc::cp_async_commit();
  float row_lse[2], row_d[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int query = q0 + warp * 16 + g + 8 * r;
    row_lse[r] = query < a.Tq ? lse[int64_t(bh) * a.Tq + query] * kLog2e : INFINITY;  // base-2 units
    row_d[r] = query < a.Tq ? delta[int64_t(bh) * a.Tq + query] : 0.f;
  }
  float dqacc[kHS / 8][4] = {};
  const float sl2 = a.scale * kLog2e;  // P = 2^(scale log2e S - lse log2e)
  for (int j = 0; j <= last; ++j) {
    if (j < last) {
      load_rows<T, kHS>(ks + ((j + 1) % 2) * kTile, kh, a.ldk, (j + 1) * kBk, kBk, a.Tk);
      load_rows<T, kHS>(vs + ((j + 1) % 2) * kTile, vh, a.ldk, (j + 1) * kBk, kBk, a.Tk);
      tc::cp_async_commit();
      tc::cp_async_wait_group<1>();
    } else {
      tc::cp_async_wait_group<0>();
    }
    __syncthreads();
    const T* kt = ks + (j % 2) * kTile;
    const T* vt = vs + (j % 2) * kTile;
    float s[kBk / 8][4] = {}, dp[kBk / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < kHS / 16; ++kc) {
      uint32_t qa[4], da[4];
      a_frag(qa, qs, kLd, warp * 16, kc * 16);
      a_frag(da, dos, kLd, warp * 16, kc * 16);
#pragma unroll
      for (int np = 0; np < kBk / 16; ++np) {
        uint32_t b0[2], b1[2];
        b_frags_nk(b0, b1, kt, kLd, np * 16, kc * 16);  // K as B: n = key, k = d
        tc::mma_m16n8k16<T>(s[2 * np], qa, b0);
        tc::mma_m16n8k16<T>(s[2 * np + 1], qa, b1);
        b_frags_nk(b0, b1, vt, kLd, np * 16, kc * 16);  // V as B
        tc::mma_m16n8k16<T>(dp[2 * np], da, b0);
        tc::mma_m16n8k16<T>(dp[2 * np + 1], da, b1);
      }
    }
    // dS = P (dP - D) into s. Masked only where the tile crosses the warp's
    // diagonal or Tk (warp-uniform). A key past Tk is a zero row of K, but
    // its P = e^-lse is not 0: its dS = -P D leaves f16's range once lse is
    // below about -11 + ln |D| (fp32's below about -88), and inf times a
    // zero K is NaN in dQ.
    const int wq0 = q0 + warp * 16;  // the warp's first query
    const bool masked = (j + 1) * kBk > a.Tk || (kCausal && (j + 1) * kBk - 1 > a.q_off + wq0);
#pragma unroll
    for (int nt = 0; nt < kBk / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2_approx(fmaf(s[nt][e], sl2, -row_lse[e >> 1]));
        if (masked) {
          const int query = wq0 + g + 8 * (e >> 1), key = j * kBk + nt * 8 + 2 * t + (e & 1);
          if (key >= a.Tk || (kCausal && key > a.q_off + query)) p = 0.f;
        }
        s[nt][e] = p * (dp[nt][e] - row_d[e >> 1]);
      }
      // dQ += dS K: dS as A (k = key), K as B (k = key, n = d) from its [key][d] tile.
#pragma unroll
    for (int kc = 0; kc < kBk / 16; ++kc) {
      uint32_t dsa[4];
      acc_to_a<T>(dsa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < kHS / 16; ++dt) {
        uint32_t b0[2], b1[2];
        b_frags_kn(b0, b1, kt, kLd, dt * 16, kc * 16);
        tc::mma_m16n8k16<T>(dqacc[2 * dt], dsa, b0);
        tc::mma_m16n8k16<T>(dqacc[2 * dt + 1], dsa, b1);
      }
    }
    __syncthreads();  // this stage is refilled by key tile j + 2
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int query = q0 + warp * 16 + g + 8 * r;
    if (query >= a.Tq) continue;
    const int64_t off = (int64_t(b) * a.Tq + query) * a.ld + head;
#pragma unroll
    for (int dt = 0; dt < kHS / 8; ++dt)
#pragma unroll
      for (int c = 0; c < 2; ++c) dq[off + dt * 8 + 2 * t + c] = from_f32<T>(dqacc[dt][2 * r + c] * a.scale);
  }
}

template <typename T, int kHS, bool kCausal>
void launch_backward(const T* dout, const T* q, const T* k, const T* v, const float* lse, const float* delta, T* dq,
                     T* dk, T* dv, const MmaDims& a, void* stream) {
  constexpr size_t kLd = kHS + kPad;
  const size_t dkdv_smem = (2 * kBc + 4 * kInnerQueries<kHS>)*kLd * sizeof(T) + 4 * kInnerQueries<kHS> * 4;
  const size_t dq_smem = (2 * kBr + 4 * kInnerKeys<kHS>)*kLd * sizeof(T);
  const unsigned k_grid = unsigned(a.BKV) * unsigned((a.Tk + kBc - 1) / kBc);
  const unsigned q_grid = unsigned(a.BH) * unsigned((a.Tq + kBr - 1) / kBr);
  gpu::allow_dynamic_smem<attention_mma_dkdv_kernel<T, kHS, kCausal>>(dkdv_smem);
  LAUNCH_KERNEL((attention_mma_dkdv_kernel<T, kHS, kCausal>), k_grid, kThreads, dkdv_smem, as_stream(stream), dout, q,
                k, v, lse, delta, dk, dv, a);
  gpu::allow_dynamic_smem<attention_mma_dq_kernel<T, kHS, kCausal>>(dq_smem);
  LAUNCH_KERNEL((attention_mma_dq_kernel<T, kHS, kCausal>), q_grid, kThreads, dq_smem, as_stream(stream), dout, q, k, v,
                lse, delta, dq, a);
}
}  // namespace

void attention_backward_mma(gpu::Storage st, const void* dout, const void* q, const void* k, const void* v,
                            const void* out, const float* lse, float* delta, void* dq, void* dk, void* dv,
                            const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream) {
  ENGINE_CHECK(st != gpu::Storage::f32, "attention_backward_mma: tensor cores take bf16 or f16, not f32");
  ENGINE_CHECK(d.HS == 64 || d.HS == 128, "attention_backward_mma: head size ", d.HS, " (64 or 128)");
  ENGINE_CHECK(d.NKV >= 0 && d.NH % (d.NKV ? d.NKV : d.NH) == 0, "attention_backward_mma: ", d.NKV,
               " K/V heads do not divide ", d.NH, " query heads");
  const MmaDims a = mma_dims(d);
  ENGINE_CHECK(a.ld % 8 == 0 && a.ldk % 8 == 0 && aligned16(q, k, v) && aligned16(dout),
               "attention_backward_mma: q, k, v and dout rows must start on 16 bytes");
  ENGINE_CHECK(d.B * d.NH * ((std::max(d.Tq, d.Tk) + 63) / 64) < (int64_t(1) << 31) && d.Tk < (int64_t(1) << 30),
               "attention_backward_mma: ", d.B, " x ", d.NH, " heads of ", d.Tq, " queries is too large a grid");
  if (d.B * d.Tq * d.NH == 0) return;
  const bool causal = mask == gpu::AttentionMask::causal;
  const int64_t rows = d.B * d.Tq * d.NH;
  dispatch_storage(st, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, float>) {
      const T *pdo = static_cast<const T*>(dout), *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k),
              *pv = static_cast<const T*>(v);
      T *pdq = static_cast<T*>(dq), *pdk = static_cast<T*>(dk), *pdv = static_cast<T*>(dv);
      LAUNCH_KERNEL(attention_delta_kernel<T>, grid_for(rows, 4), 128, 0, as_stream(stream), pdo,
                    static_cast<const T*>(out), delta, rows, int(d.Tq), int(d.NH), int(d.HS));
      if (d.HS == 64 && causal) launch_backward<T, 64, true>(pdo, pq, pk, pv, lse, delta, pdq, pdk, pdv, a, stream);
      if (d.HS == 64 && !causal) launch_backward<T, 64, false>(pdo, pq, pk, pv, lse, delta, pdq, pdk, pdv, a, stream);
      if (d.HS == 128 && causal) launch_backward<T, 128, true>(pdo, pq, pk, pv, lse, delta, pdq, pdk, pdv, a, stream);
      if (d.HS == 128 && !causal) launch_backward<T, 128, false>(pdo, pq, pk, pv, lse, delta, pdq, pdk, pdv, a, stream);
    }
  });
}

}  // namespace eng::ENGINE_GPU_NS
