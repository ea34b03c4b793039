// Fused attention, causal or not, FlashAttention-2 style (Dao 2023),
// forward and backward. Reference: kernels/cpu/attention.cpp; walk-through:
// docs/kernels/attention.md.
//   S = Q K^T * scale (causal: keys j > q_offset + i masked), P = softmax(S), O = P V,
//   scale = 1/sqrt(HS), lse_i = log sum_j exp(S_ij)   (saved for backward)
//   backward: D_i = rowsum(dO_i * O_i), P_ij = exp(S_ij - lse_i),
//             dV = P^T dO, dS = P * (dO V^T - D), dQ = dS K * scale, dK = dS^T Q * scale
// No T x T matrix ever reaches global memory: every kernel works on 16 x 16
// tiles of S in shared memory and recomputes them where the reference would
// store them.
// Masks (template parameter kMask): causal visits only the tile pairs at or
// below the diagonal, P = n(n+1)/2 of them for n = ceil(Tn / 16) tiles, and
// masks inside the diagonal tiles; none (a ViT's bidirectional attention)
// visits all P = n^2 pairs, ~2x the FLOPs, and masks only the keys past Tn
// of the ragged last tile. A template parameter rather than a runtime field:
// when the mask was added, the causal instantiations compiled to exactly the
// registers they had before (ptxas -v, sm_80 and sm_90), where a runtime
// flag moved them by -3..+13; the price is twice the instantiations (compile
// time). The build fails on any spill (kernels/cuda/CMakeLists.txt).
// Queries and keys may differ in number (Tq <= Tk): context parallelism
// gives a rank the queries at positions q_offset .. q_offset + Tq - 1 of the
// sequence and every key (gathered). Then n_q = ceil(Tq / 16) query tiles
// meet n_k key tiles; the diagonal moves by q_offset (causal: query i sees
// keys 0..q_offset + i), and P counts the pairs at or below it. Below, Tn is
// Tq for q, out, lse and Tk for k, v; self-attention is Tq = Tk, q_offset 0.
// Grouped-query attention (NKV < NH K/V heads): query head h reads K/V head
// h / group in place (group = NH / NKV; no repeated K/V in memory); the
// dK/dV kernel takes one K/V head's key tile and walks every query tile of
// its group's heads in turn, so dK and dV sum the group without atomics.
// Layout: q, out, dq, dout are (B, Tq, NH, HS), k, v, dk, dv (B, Tk, NKV, HS)
// in the storage dtype T (f32/bf16/f16): row (b, t, h) of q starts at
// ((b*T + t)*NH + h)*HS (rows ld apart in a packed qkv), of k at
// ((b*T + t)*NKV + h)*HS. lse and delta are fp32 (B, NH, Tq). All math is
// fp32; outputs are written (=).
//
// Tiling, the same in all three tile kernels: Br = Bc = kTile = 16, and a
// block of 128 threads = 16 tile rows x 8 lanes. Lane l of a row owns the
// head dims d = l, l+8, l+16, ... of that row's accumulator (O, dQ, or dK and
// dV), in registers, and the S entries of columns l and l+8 of the row.
// Shared memory, fp32, rows padded by one float (a lane's K row stride would
// otherwise be a multiple of 32 banks: an 8-way conflict): forward Q, K, V
// tiles + P = 3*16*129*4 + 16*17*4 B = 25.3 KiB at HS = 128; backward K, V,
// Q, dO + P, dS (+ lse, D) = 4*16*129*4 + 2*16*17*4 (+ 128) B = 34.5 KiB
// (dQ: one score tile, 33.3 KiB); all under the 48 KiB of static
// shared memory a block may have without opting in. 128 threads keep the
// emulator cheap (one fiber per CUDA thread). __launch_bounds__(128, 1): with
// the thread count alone, ptxas capped the small-HS instantiations at 40-56
// registers and spilled (measured, sm_80); with a minimum of one block it
// takes 64-120 registers and spills nothing on sm_80 and sm_90, which still
// leaves 4 blocks (16 warps) per SM.
// Larger tiles (64 x 64 with tensor cores, as FlashAttention ships) would
// reuse each K/V tile for more queries; the emulator has no mma, and this
// kernel is the readable baseline the docs compare against.
//
// Head dims: the kernels are templated on kHS in {8, 16, 32, 64, 128};
// HS is rounded up to the next one and the extra dims are zero in shared
// memory (so dot products are exact) and never stored. HS = 64 and 128 run
// unpadded; HS = 24 runs as 32 (25% wasted math). HS > 128 is rejected: its
// fp32 tiles would not fit 48 KiB at this tile size.
#include <climits>
#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_delta.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kTile = 16;                 // Br = Bc
constexpr int kLanes = 8;                 // threads per tile row
constexpr int kThreads = kTile * kLanes;  // 128
constexpr int kCols = kTile / kLanes;     // S columns (or rows) per thread: 2
constexpr int kMaxHS = 128;

// Max and sum over the 8 lanes of a tile row (an aligned 8-lane segment of a
// warp; every lane of the warp calls it, so the full mask is right).
__device__ __forceinline__ float row_max(float v) {
  for (int off = kLanes / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(rowwise::kFullMask, v, off, kLanes));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
  for (int off = kLanes / 2; off > 0; off >>= 1) v += __shfl_xor_sync(rowwise::kFullMask, v, off, kLanes);
  return v;
}

// Rows t0 .. t0+kTile-1 of one head into a padded fp32 tile; rows past Tn and
// dims past hs are zero. base points at (b, 0, h, 0); rows are NH*HS apart.
// All threads of the block take part (coalesced along d).
template <int kHS, typename T>
__device__ __forceinline__ void load_tile(float (*tile)[kHS + 1], const T* base, int t0, int Tn, int64_t row_stride,
                                          int hs) {
  for (int idx = int(threadIdx.x); idx < kTile * kHS; idx += kThreads) {
    const int r = idx / kHS, d = idx % kHS;
    tile[r][d] = (t0 + r < Tn && d < hs) ? to_f32(base[int64_t(t0 + r) * row_stride + d]) : 0.f;
  }
}

template <int kHS>
__device__ __forceinline__ float dot_rows(const float* a, const float* b) {
  float s = 0.f;
#pragma unroll 8
  for (int d = 0; d < kHS; ++d) s += a[d] * b[d];
  return s;
}

// Kernel arguments shared by the tile kernels.
struct AttnDims {
  int Tq, Tk, q_off, NH, hs, BH, q_tiles, k_tiles;  // BH = B*NH; q_tiles = ceil(Tq / kTile), k_tiles likewise
  float scale;
  int64_t ld;   // rows of q (and dq) are ld apart: NH*hs, or (NH + 2 NKV) hs in a packed qkv
  int64_t ldk;  // rows of k, v (and dk, dv): NKV*hs, or ld in a packed qkv
  int group;    // query heads per K/V head (NH / NKV; 1 without grouping)
  int BKV;      // B * NKV
};
// Where head (b, h) starts in a (B, Tn, rows ld apart) tensor: q and dq
// with ld = a.ld, out and dout (always (B, Tn, NH, HS)) with NH*hs.
__device__ __forceinline__ int64_t head_base(const AttnDims& a, int bh, int Tn, int64_t ld) {
  const int b = bh / a.NH, h = bh % a.NH;
  return int64_t(b) * Tn * ld + int64_t(h) * a.hs;
}
// Where the K/V head that query head (b, h) reads starts in k, v (B, Tk, rows ldk apart).
__device__ __forceinline__ int64_t kv_base(const AttnDims& a, int bh) {
  const int b = bh / a.NH, h = bh % a.NH;
  return int64_t(b) * a.Tk * a.ldk + int64_t(h / a.group) * a.hs;
}
// Whether query i attends to key j: causal, keys 0..q_off+i; none, every key.
// Keys past Tk, the zero rows of a ragged last tile, are never seen (a zero
// key scores 0, not -inf, and would take a share of the probability).
template <gpu::AttentionMask kMask>
__device__ __forceinline__ bool sees(int i, int key, const AttnDims& a) {
  if constexpr (kMask == gpu::AttentionMask::causal)
    return key <= a.q_off + i && key < a.Tk;
  else
    return key < a.Tk;
}
// The last key tile that query tile qt sees (forward, dQ), and the first
// query tile that sees key tile kt (dK/dV).
template <gpu::AttentionMask kMask>
__device__ __forceinline__ int last_key_tile(int qt, const AttnDims& a) {
  return kMask == gpu::AttentionMask::causal ? min(a.k_tiles - 1, (a.q_off + qt * kTile + kTile - 1) / kTile)
                                             : a.k_tiles - 1;
}
template <gpu::AttentionMask kMask>
__device__ __forceinline__ int first_query_tile(int kt, const AttnDims& a) {
  return kMask == gpu::AttentionMask::causal ? max(0, kt * kTile - a.q_off) / kTile : 0;
}
}  // namespace

// attention_forward_kernel: one block per (query tile, b*h); it loops over
// the key/value tiles it sees (causal: up to the tile of key q_off + its last
// query, later tiles are fully masked; none: all) with an online softmax: per query row a running max m and sum
// l; each tile's scores raise m to m', the accumulator O and l are rescaled
// by exp(m - m'), and O += exp(S - m') V. At the end O /= l, lse = m + log l.
// Launch: grid = B*NH*q_tiles (causal: heaviest query tiles first), 128 threads, static
// shared memory (see the file comment). Preconditions: 1 <= hs <= kHS,
// q, k, v, out do not alias; 1 <= Tq, causal: q_off + Tq <= Tk. Every query
// row sees key 0, so m is finite after the first tile (no exp(-inf - -inf)).
// With P tile pairs (n(n+1)/2 causal, n^2 unmasked for self-attention, n = tiles):
// bytes = sizeof(T) B NH HS (2 Tn + 2 kTile P) + 4 B NH Tn
//   (Q read and O written once; each K/V tile once per query tile that sees it);
// flops = 4 B NH HS kTile^2 P (QK^T and PV) ~= 2 B NH Tn^2 HS causal,
//   4 B NH Tn^2 HS unmasked; plus B NH kTile^2 P exps.
template <typename T, int kHS, gpu::AttentionMask kMask>
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                             T* __restrict__ out, float* __restrict__ lse, AttnDims a) {
  __shared__ float smem_q[kTile][kHS + 1];
  __shared__ float smem_k[kTile][kHS + 1];
  __shared__ float smem_v[kTile][kHS + 1];
  __shared__ float smem_p[kTile][kTile + 1];
  constexpr int kD = kHS / kLanes;  // accumulator dims per lane
  const int bh = int(blockIdx.x) % a.BH, qt = a.q_tiles - 1 - int(blockIdx.x) / a.BH;
  const int64_t qbase = head_base(a, bh, a.Tq, a.ld), kbase = kv_base(a, bh), row_stride = a.ld;
  const int64_t o_stride = int64_t(a.NH) * a.hs, obase = head_base(a, bh, a.Tq, o_stride);
  const int r = int(threadIdx.x) / kLanes, lane = int(threadIdx.x) % kLanes;
  const int q0 = qt * kTile, i = q0 + r;

  load_tile<kHS>(smem_q, q + qbase, q0, a.Tq, row_stride, a.hs);
  float m = -INFINITY, l = 0.f, o[kD];
#pragma unroll
  for (int x = 0; x < kD; ++x) o[x] = 0.f;
  const int kt_last = last_key_tile<kMask>(qt, a);
  for (int kt = 0; kt <= kt_last; ++kt) {
    const int k0 = kt * kTile;
    load_tile<kHS>(smem_k, k + kbase, k0, a.Tk, a.ldk, a.hs);
    load_tile<kHS>(smem_v, v + kbase, k0, a.Tk, a.ldk, a.hs);
    __syncthreads();
    float s[kCols], tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = lane + j * kLanes, key = k0 + c;
      s[j] = sees<kMask>(i, key, a) ? dot_rows<kHS>(smem_q[r], smem_k[c]) * a.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float m_new = fmaxf(m, row_max(tile_max));
    const float alpha = expf(m - m_new);  // 0 on the first tile (m = -inf)
    float psum = 0.f;
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const float p = expf(s[j] - m_new);  // masked: exp(-inf) = 0
      smem_p[r][lane + j * kLanes] = p;
      psum += p;
    }
    l = l * alpha + row_sum(psum);
    m = m_new;
    __syncthreads();
#pragma unroll
    for (int x = 0; x < kD; ++x) o[x] *= alpha;
    for (int c = 0; c < kTile; ++c) {
      const float p = smem_p[r][c];
#pragma unroll
      for (int x = 0; x < kD; ++x) o[x] += p * smem_v[c][lane + x * kLanes];
    }
    __syncthreads();  // before the next tile overwrites K, V, P
  }
  if (i < a.Tq) {
    const float inv = 1.f / l;
    T* orow = out + obase + int64_t(i) * o_stride;
#pragma unroll
    for (int x = 0; x < kD; ++x) {
      const int d = lane + x * kLanes;
      if (d < a.hs) orow[d] = from_f32<T>(o[x] * inv);
    }
    if (lane == 0) lse[int64_t(bh) * a.Tq + i] = m + logf(l);
  }
}

// attention_backward_dkdv_kernel: one block per (key tile kt, b*kv head); K and V
// stay in shared memory while the block walks, for each query head of the
// K/V head's group in turn, the query tiles that see these keys (causal: from the tile of query kt*16 - q_off on; none:
// all), recomputing per tile P = exp(S - lse) and dS = P (dO V^T - D), and accumulating in registers dV += P^T dO and
// dK += dS^T Q (scaled once at the end). Thread row c is a key. Launch: grid = B*NKV*k_tiles (causal: key tile 0, the
// most work, first), 128 threads. Preconditions: as the forward; lse and delta hold the forward's values. With P tile
// pairs as in the forward: bytes = sizeof(T) B NH HS (4 Tn + 2 kTile P) + 8 B NH kTile P; flops = 8 B NH HS kTile^2 P
// (S, dP, dV, dK) ~= 4 B NH Tn^2 HS causal,
//   8 B NH Tn^2 HS unmasked.
template <typename T, int kHS, gpu::AttentionMask kMask>
__global__ void __launch_bounds__(kThreads, 1)
    attention_backward_dkdv_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                                   const T* __restrict__ v, const float* __restrict__ lse,
                                   const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
                                   AttnDims a) {
  __shared__ float smem_k[kTile][kHS + 1];
  __shared__ float smem_v[kTile][kHS + 1];
  __shared__ float smem_q[kTile][kHS + 1];
  __shared__ float smem_do[kTile][kHS + 1];
  __shared__ float smem_p[kTile][kTile + 1];
  __shared__ float smem_ds[kTile][kTile + 1];
  __shared__ float smem_lse[kTile], smem_delta[kTile];
  constexpr int kD = kHS / kLanes;
  const int bkv = int(blockIdx.x) % a.BKV, kt = int(blockIdx.x) / a.BKV;
  const int bh0 = bkv / (a.NH / a.group) * a.NH + bkv % (a.NH / a.group) * a.group;  // the group's first (b, h)
  const int64_t kbase = kv_base(a, bh0), row_stride = a.ld;
  const int64_t o_stride = int64_t(a.NH) * a.hs;
  const int c = int(threadIdx.x) / kLanes, lane = int(threadIdx.x) % kLanes;
  const int k0 = kt * kTile, key = k0 + c;

  load_tile<kHS>(smem_k, k + kbase, k0, a.Tk, a.ldk, a.hs);
  load_tile<kHS>(smem_v, v + kbase, k0, a.Tk, a.ldk, a.hs);
  float acc_dk[kD], acc_dv[kD];
#pragma unroll
  for (int x = 0; x < kD; ++x) acc_dk[x] = acc_dv[x] = 0.f;
  const int q_first = first_query_tile<kMask>(kt, a), steps = (a.q_tiles - q_first) * a.group;
  for (int step = 0; step < steps; ++step) {  // (query head of the group, query tile)
    const int bh = bh0 + step / (a.q_tiles - q_first), qt = q_first + step % (a.q_tiles - q_first);
    const int64_t qbase = head_base(a, bh, a.Tq, a.ld), obase = head_base(a, bh, a.Tq, o_stride);
    const int q0 = qt * kTile;
    load_tile<kHS>(smem_q, q + qbase, q0, a.Tq, row_stride, a.hs);
    load_tile<kHS>(smem_do, dout + obase, q0, a.Tq, o_stride, a.hs);
    if (threadIdx.x < kTile) {
      const bool in = q0 + int(threadIdx.x) < a.Tq;
      smem_lse[threadIdx.x] = in ? lse[int64_t(bh) * a.Tq + q0 + threadIdx.x] : 0.f;
      smem_delta[threadIdx.x] = in ? delta[int64_t(bh) * a.Tq + q0 + threadIdx.x] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int r = lane + j * kLanes, i = q0 + r;
      float p = 0.f, ds = 0.f;
      if (i < a.Tq && sees<kMask>(i, key, a)) {
        p = expf(dot_rows<kHS>(smem_q[r], smem_k[c]) * a.scale - smem_lse[r]);
        ds = p * (dot_rows<kHS>(smem_do[r], smem_v[c]) - smem_delta[r]);
      }
      smem_p[r][c] = p;
      smem_ds[r][c] = ds;
    }
    __syncthreads();
    for (int r = 0; r < kTile; ++r) {
      const float p = smem_p[r][c], ds = smem_ds[r][c];
#pragma unroll
      for (int x = 0; x < kD; ++x) {
        acc_dv[x] += p * smem_do[r][lane + x * kLanes];
        acc_dk[x] += ds * smem_q[r][lane + x * kLanes];
      }
    }
    __syncthreads();  // before the next query tile overwrites Q, dO, P, dS
  }
  if (key < a.Tk) {
    const int64_t off = kbase + int64_t(key) * a.ldk;
#pragma unroll
    for (int x = 0; x < kD; ++x) {
      const int d = lane + x * kLanes;
      if (d < a.hs) {
        dk[off + d] = from_f32<T>(acc_dk[x] * a.scale);
        dv[off + d] = from_f32<T>(acc_dv[x]);
      }
    }
  }
}

// attention_backward_dq_kernel: one block per (query tile qt, b*h); Q, dO,
// lse and D stay put while the block walks the key tiles it sees (causal:
// up to the one holding key q_off + the tile's last query; none: all), recomputing P and dS once more and accumulating
// dQ += dS K in registers. A second recomputation instead of atomicAdd into
// a shared fp32 dQ: the result is deterministic (the same bits on every
// run), needs no fp32 scratch tensor or cast pass, and costs 3 more tile
// GEMMs of the 14 the backward does.
// Launch: grid = B*NH*q_tiles (causal: heaviest first), 128 threads.
// With P tile pairs as in the forward:
// bytes = sizeof(T) B NH HS (3 Tn + 2 kTile P) + 8 B NH Tn;
// flops = 6 B NH HS kTile^2 P (S, dP, dQ) ~= 3 B NH Tn^2 HS causal,
//   6 B NH Tn^2 HS unmasked.
template <typename T, int kHS, gpu::AttentionMask kMask>
__global__ void __launch_bounds__(kThreads, 1)
    attention_backward_dq_kernel(const T* __restrict__ dout, const T* __restrict__ q, const T* __restrict__ k,
                                 const T* __restrict__ v, const float* __restrict__ lse,
                                 const float* __restrict__ delta, T* __restrict__ dq, AttnDims a) {
  __shared__ float smem_q[kTile][kHS + 1];
  __shared__ float smem_do[kTile][kHS + 1];
  __shared__ float smem_k[kTile][kHS + 1];
  __shared__ float smem_v[kTile][kHS + 1];
  __shared__ float smem_ds[kTile][kTile + 1];
  constexpr int kD = kHS / kLanes;
  const int bh = int(blockIdx.x) % a.BH, qt = a.q_tiles - 1 - int(blockIdx.x) / a.BH;
  const int64_t qbase = head_base(a, bh, a.Tq, a.ld), kbase = kv_base(a, bh), row_stride = a.ld;
  const int64_t o_stride = int64_t(a.NH) * a.hs, obase = head_base(a, bh, a.Tq, o_stride);
  const int r = int(threadIdx.x) / kLanes, lane = int(threadIdx.x) % kLanes;
  const int q0 = qt * kTile, i = q0 + r;
  const bool row_in = i < a.Tq;
  const float row_lse = row_in ? lse[int64_t(bh) * a.Tq + i] : 0.f;
  const float row_delta = row_in ? delta[int64_t(bh) * a.Tq + i] : 0.f;

  load_tile<kHS>(smem_q, q + qbase, q0, a.Tq, row_stride, a.hs);
  load_tile<kHS>(smem_do, dout + obase, q0, a.Tq, o_stride, a.hs);
  float acc[kD];
#pragma unroll
  for (int x = 0; x < kD; ++x) acc[x] = 0.f;
  const int kt_last = last_key_tile<kMask>(qt, a);
  for (int kt = 0; kt <= kt_last; ++kt) {
    const int k0 = kt * kTile;
    load_tile<kHS>(smem_k, k + kbase, k0, a.Tk, a.ldk, a.hs);
    load_tile<kHS>(smem_v, v + kbase, k0, a.Tk, a.ldk, a.hs);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = lane + j * kLanes;
      float ds = 0.f;
      if (row_in && sees<kMask>(i, k0 + c, a)) {
        const float p = expf(dot_rows<kHS>(smem_q[r], smem_k[c]) * a.scale - row_lse);
        ds = p * (dot_rows<kHS>(smem_do[r], smem_v[c]) - row_delta);
      }
      smem_ds[r][c] = ds;
    }
    __syncthreads();
    for (int c = 0; c < kTile; ++c) {
      const float ds = smem_ds[r][c];
#pragma unroll
      for (int x = 0; x < kD; ++x) acc[x] += ds * smem_k[c][lane + x * kLanes];
    }
    __syncthreads();  // before the next key tile overwrites K, V, dS
  }
  if (row_in) {
    const int64_t off = qbase + int64_t(i) * row_stride;
#pragma unroll
    for (int x = 0; x < kD; ++x) {
      const int d = lane + x * kLanes;
      if (d < a.hs) dq[off + d] = from_f32<T>(acc[x] * a.scale);
    }
  }
}

namespace {
// Calls f.template operator()<kHS>() with kHS the padded head size.
template <typename F>
void dispatch_head(int64_t HS, F&& f) {
  if (HS <= 8)
    f.template operator()<8>();
  else if (HS <= 16)
    f.template operator()<16>();
  else if (HS <= 32)
    f.template operator()<32>();
  else if (HS <= 64)
    f.template operator()<64>();
  else
    f.template operator()<128>();
}

// Calls f.template operator()<kHS, kMask>() with kHS the padded head size.
template <typename F>
void dispatch_head_mask(int64_t HS, gpu::AttentionMask mask, F&& f) {
  dispatch_head(HS, [&]<int kHS>() {
    if (mask == gpu::AttentionMask::causal)
      f.template operator()<kHS, gpu::AttentionMask::causal>();
    else
      f.template operator()<kHS, gpu::AttentionMask::none>();
  });
}

AttnDims make_dims(const char* fn, const gpu::AttentionDims& d, gpu::AttentionMask mask) {
  ENGINE_CHECK(d.HS >= 1 && d.HS <= kMaxHS, fn, ": head size ", d.HS, " not supported (1..", kMaxHS, ")");
  ENGINE_CHECK(d.Tq <= d.Tk && d.q_offset >= 0 && (mask != gpu::AttentionMask::causal || d.q_offset + d.Tq <= d.Tk), fn,
               ": queries at ", d.q_offset, "..", d.q_offset + d.Tq - 1, " do not lie within ", d.Tk, " keys");
  const int64_t q_tiles = (d.Tq + kTile - 1) / kTile, k_tiles = (d.Tk + kTile - 1) / kTile;
  const int64_t rows = d.B * d.Tk * d.NH, NKV = d.NKV ? d.NKV : d.NH;
  ENGINE_CHECK(d.B * d.NH * k_tiles <= INT_MAX && rows <= INT_MAX, fn, ": (B, T, NH) = (", d.B, ", ", d.Tk, ", ", d.NH,
               ") too large");
  ENGINE_CHECK(NKV > 0 && d.NH % NKV == 0, fn, ": ", NKV, " K/V heads do not divide ", d.NH, " query heads");
  ENGINE_CHECK(d.ld_qkv == 0 || d.ld_qkv >= d.NH * d.HS, fn, ": rows of q, k, v ", d.ld_qkv, " apart overlap their ",
               d.NH * d.HS, " elements");
  return AttnDims{int(d.Tq),
                  int(d.Tk),
                  int(d.q_offset),
                  int(d.NH),
                  int(d.HS),
                  int(d.B * d.NH),
                  int(q_tiles),
                  int(k_tiles),
                  1.f / std::sqrt(float(d.HS)),
                  d.ld_qkv ? d.ld_qkv : d.NH * d.HS,
                  d.ld_qkv ? d.ld_qkv : NKV * d.HS,
                  int(d.NH / NKV),
                  int(d.B * NKV)};
}
}  // namespace

int64_t attention_max_head_size() { return kMaxHS; }

void attention_forward(gpu::Storage st, const void* q, const void* k, const void* v, void* out, float* lse,
                       const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream) {
  if (d.B * d.Tq * d.NH == 0) return;
  const AttnDims a = make_dims("attention_forward", d, mask);
  const unsigned grid = unsigned(a.BH) * unsigned(a.q_tiles);
  dispatch_storage(st, [&]<typename T>() {
    dispatch_head_mask(d.HS, mask, [&]<int kHS, gpu::AttentionMask kMask>() {
      LAUNCH_KERNEL(attention_forward_kernel<T, kHS, kMask>, grid, kThreads, 0, as_stream(stream),
                    static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<T*>(out),
                    lse, a);
    });
  });
}

void attention_backward(gpu::Storage st, const void* dout, const void* q, const void* k, const void* v, const void* out,
                        const float* lse, float* delta, void* dq, void* dk, void* dv, const gpu::AttentionDims& d,
                        gpu::AttentionMask mask, void* stream) {
  if (d.B * d.Tq * d.NH == 0) return;
  const AttnDims a = make_dims("attention_backward", d, mask);
  const unsigned q_grid = unsigned(a.BH) * unsigned(a.q_tiles), k_grid = unsigned(a.BKV) * unsigned(a.k_tiles);
  const int64_t rows = d.B * d.Tq * d.NH;
  dispatch_storage(st, [&]<typename T>() {
    const T* pdo = static_cast<const T*>(dout);
    const T* pq = static_cast<const T*>(q);
    const T* pk = static_cast<const T*>(k);
    const T* pv = static_cast<const T*>(v);
    const auto s = as_stream(stream);
    LAUNCH_KERNEL(attention_delta_kernel<T>, grid_for(rows, 4), 128, 0, s, pdo, static_cast<const T*>(out), delta, rows,
                  a.Tq, a.NH, a.hs);
    dispatch_head_mask(d.HS, mask, [&]<int kHS, gpu::AttentionMask kMask>() {
      LAUNCH_KERNEL(attention_backward_dkdv_kernel<T, kHS, kMask>, k_grid, kThreads, 0, s, pdo, pq, pk, pv, lse,
                    static_cast<const float*>(delta), static_cast<T*>(dk), static_cast<T*>(dv), a);
      LAUNCH_KERNEL(attention_backward_dq_kernel<T, kHS, kMask>, q_grid, kThreads, 0, s, pdo, pq, pk, pv, lse,
                    static_cast<const float*>(delta), static_cast<T*>(dq), a);
    });
  });
}

}  // namespace eng::ENGINE_GPU_NS
