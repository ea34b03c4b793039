// Multi-head attention, causal or not, the plain three-step reference
// (llm.c's attention_forward_cpu, with its matrix products done by GEMMs):
// per batch b and head h, with Q the (Tq, HS) slice of that head and K, V
// the (Tk, HS) slices,
//   S = Q K^T / sqrt(HS)  (Tq x Tk; query i sits at key position
//                          q_offset + i; AttentionMask::causal masks keys
//                          j > q_offset + i, ::none masks nothing)
//   P = softmax(S) row-wise          (saved in att for backward)
//   O = P V
// backward: dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P));
//           dQ = dS K / sqrt(HS); dK = dS^T Q / sqrt(HS)
// Grouped-query attention (d.NKV < NH): query head h reads K/V head
// h / (NH / NKV) in place (no repeated copies); dK and dV of a K/V head sum
// its query heads' shares in head order (the backward runs a K/V head's
// group on one thread: fixed bits).
// Self-attention is Tq = Tk, q_offset 0; context parallelism gives each rank
// its slice of the queries (q_offset = its first position) against every
// key, gathered.
// Layout: q, out are (B, Tq, NH, HS), k, v (B, Tk, NKV, HS): element (b, t,
// h, d) of q sits at ((b*T + t)*NH + h)*HS + d (of k and v with NKV), so a head's slice is a (T, HS)
// matrix with row stride NH*HS (or d.ld_qkv, q, k, v packed in one tensor),
// which the GEMMs read and write in place, but for K in the forward and V in
// the backward: each head's slice is copied transposed (transpose_head) so
// that S = Q (K^T) and dP = dO (V^T) are NN products. att is (B, NH, Tq,
// Tk), the masked part written as 0 as far as the products read it (the end
// of the causal block holding the row's last key, zeros_end below); the rest
// of the upper triangle is left unwritten.
// Causal blocks: the products run on blocks of kBlock query rows (S, P V,
// dP, dQ) or kBlock key rows (dV, dK), each only as far as the last key (or
// from the first query) the block's rows see, so the GEMMs skip the masked
// upper triangle but for its diagonal blocks: for Tq = Tk = T, with
// nb = ceil(T / kBlock) blocks, (nb + 1) / (2 nb) of the full square
// (T = 256, kBlock 32: 56%). Without a mask, one block of all rows.
// flops (what runs): forward 4*B*NH*HS*A, backward 8*B*NH*HS*A, A the
// computed part of the Tq x Tk square (all of it without a mask).
// bytes: 4*(2*B*Tq*NH*HS + 2*B*Tk*NH*HS) + 4*B*NH*Tq*Tk per pass (fp32),
// plus 4*2*B*Tk*NH*HS for the transposed copy of K (or V): the
// Tq x Tk matrix is the traffic the fused CUDA kernel avoids.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vmath.h"
#include "kernels/gemm/gemm.h"

namespace eng::cpu {

namespace {
// Rows per causal block: small enough that the skipped triangle is most of
// the masked half, large enough that each GEMM is more than call overhead.
constexpr int64_t kBlock = 32;

// The last key that query i sees.
int64_t last_key(int64_t i, const AttentionDims& d, AttentionMask mask) {
  return mask == AttentionMask::causal ? std::min(d.q_offset + i, d.Tk - 1) : d.Tk - 1;
}
// The first query that sees key j (Tq when none does).
int64_t first_query(int64_t j, const AttentionDims& d, AttentionMask mask) {
  return mask == AttentionMask::causal ? std::clamp(j - d.q_offset, int64_t(0), d.Tq) : 0;
}
int64_t block_rows(int64_t n, AttentionMask mask) { return mask == AttentionMask::causal ? kBlock : n; }

// How far row i of P (or dS) must hold zeros after its last key `last`: as
// far as a GEMM reads it. Its query block's products read to kend (P V, dQ);
// dV and dK read the key block holding `last` whole (blocks of cb keys from
// 0, each from its first query on). Beyond that the row is never read, and
// never written: under the causal mask the upper triangle costs no stores.
int64_t zeros_end(int64_t last, int64_t kend, int64_t Tk, int64_t cb) {
  return std::min(Tk, std::max(kend, (last / cb + 1) * cb));
}

// The row loops, one row per call at the CPU's vector width (loops.h).
// Softmax of row[0..last] in place, zeros after it up to n.
template <typename T>
ENGINE_CPU_CLONES void softmax_row(T* row, int64_t last, int64_t n) {
  T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j <= last; ++j) mx = std::max(mx, row[j]);
  T sum = 0;
  if constexpr (std::is_same_v<T, float>) {
    sum = exp_shift_sum(row, row, last + 1, mx);  // libmvec's vector expf (vmath.h)
  } else {
    for (int64_t j = 0; j <= last; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t j = 0; j <= last; ++j) row[j] *= inv;
  std::fill(row + last + 1, row + n, T(0));
}

// Softmax backward of one row: ds (dP in, dS out) = p * (ds - p . ds) * sc
// over 0..last, zeros after it up to n.
template <typename T>
ENGINE_CPU_CLONES void softmax_backward_row(const T* p, T* ds, int64_t last, int64_t n, T sc) {
  T dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j <= last; ++j) dot += p[j] * ds[j];
#pragma omp simd
  for (int64_t j = 0; j <= last; ++j) ds[j] = p[j] * (ds[j] - dot) * sc;
  std::fill(ds + last + 1, ds + n, T(0));
}

// dst (HS x rows, row stride ldd) = src^T, src the (rows, HS) slice of a
// head (row stride ld): the products against K^T and V^T then run as NN
// GEMMs. OpenBLAS 0.3.21 runs these shapes as NT twice as slow (HS = 32,
// operands in cache: 32 x 128 x 32 in 2.1 us NT, 1.1 us NN), and in a
// training step most NT calls took its packed path (packing both operands
// for a 32-row product): 13% of the tiny shape's GEMM time. With the copy
// (4*2*rows*HS bytes, 1.5% of that step) the step runs 1.02-1.05x faster.
// The copy element by element is what it costs in the step: an 8 x 8
// in-register transpose (vector shuffles) ran 3.7x faster on a head in
// cache (0.99 -> 0.27 us) and no faster in the step, where this is the
// first read of K (V) since the qkv projection wrote it, and the time is
// the cache misses.
template <typename T>
ENGINE_CPU_CLONES void transpose_head(const T* src, int64_t ld, int64_t rows, int64_t HS, T* dst, int64_t ldd) {
  constexpr int64_t kTile = 16;  // rows per tile: its HS columns stay in L1 while dst's rows are written
  for (int64_t t0 = 0; t0 < rows; t0 += kTile) {
    const int64_t t1 = std::min(rows, t0 + kTile);
    for (int64_t dd = 0; dd < HS; ++dd)
      for (int64_t t = t0; t < t1; ++t) dst[dd * ldd + t] = src[t * ld + dd];
  }
}
}  // namespace

template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* att, const AttentionDims& d, AttentionMask mask) {
  const int64_t B = d.B, Tq = d.Tq, Tk = d.Tk, NH = d.NH, HS = d.HS, ldo = NH * HS, ld = d.ld_qkv ? d.ld_qkv : ldo;
  const int64_t NKV = d.NKV ? d.NKV : NH, G = NH / NKV, ldk = d.ld_qkv ? d.ld_qkv : NKV * HS;
  const T sc = T(1) / std::sqrt(T(HS));
  const int64_t rb = block_rows(Tq, mask), cb = block_rows(Tk, mask);
  // Each (b, h) is independent; the GEMMs inside run single-threaded there.
  // Per thread, K^T of one head (HS x Tk, only the keys some query sees);
  // allocated here, where a failure is an exception, not inside the region.
  const int64_t keys = last_key(Tq - 1, d, mask) + 1;
  const std::unique_ptr<T[]> kts(new T[size_t(omp_get_max_threads() * HS * Tk)]);
#pragma omp parallel
  {
    T* kt = kts.get() + omp_get_thread_num() * HS * Tk;
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        T* P = att + (b * NH + h) * Tq * Tk;
        const T* qh = q + b * Tq * ld + h * HS;
        const T* vh = v + b * Tk * ldk + h / G * HS;
        T* oh = out + b * Tq * ldo + h * HS;
        transpose_head(k + b * Tk * ldk + h / G * HS, ldk, keys, HS, kt, Tk);
        for (int64_t i0 = 0; i0 < Tq; i0 += rb) {
          const int64_t m = std::min(rb, Tq - i0), kend = last_key(i0 + m - 1, d, mask) + 1;
          T* Pb = P + i0 * Tk;
          gemm<T>(Trans::N, Trans::N, m, kend, HS, sc, qh + i0 * ld, ld, kt, Tk, T(0), Pb, Tk);  // S
          for (int64_t i = i0; i < i0 + m; ++i) {
            const int64_t last = last_key(i, d, mask);
            softmax_row(P + i * Tk, last, zeros_end(last, kend, Tk, cb));
          }
          gemm<T>(Trans::N, Trans::N, m, HS, kend, T(1), Pb, Tk, vh, ldk, T(0), oh + i0 * ldo, ldo);  // O = P V
        }
      }
  }
}

template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* att, T* dq, T* dk, T* dv,
                        const AttentionDims& d, AttentionMask mask) {
  const int64_t B = d.B, Tq = d.Tq, Tk = d.Tk, NH = d.NH, HS = d.HS, ldo = NH * HS, ld = d.ld_qkv ? d.ld_qkv : ldo;
  const int64_t NKV = d.NKV ? d.NKV : NH, G = NH / NKV, ldk = d.ld_qkv ? d.ld_qkv : NKV * HS;
  const T sc = T(1) / std::sqrt(T(HS));
  const int64_t rb = block_rows(Tq, mask), cb = block_rows(Tk, mask);
  // Per thread: dS of one head (Tq x Tk; every entry of it that is read is
  // written first) and V^T (HS x Tk, the keys some query sees), allocated
  // here, where a failure is an exception, not inside the region.
  const int64_t keys = last_key(Tq - 1, d, mask) + 1, per_thread = Tq * Tk + HS * Tk;
  const std::unique_ptr<T[]> work(new T[size_t(omp_get_max_threads() * per_thread)]);
#pragma omp parallel
  {
    T* dS = work.get() + omp_get_thread_num() * per_thread;
    T* vt = dS + Tq * Tk;
    // A K/V head and its group of G query heads on one thread: dK and dV
    // sum the group's shares (beta 1 after the first) with no race.
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t kh = 0; kh < NKV; ++kh) {
        const size_t ko = size_t(b * Tk * ldk + kh * HS);
        transpose_head(v + ko, ldk, keys, HS, vt, Tk);
        for (int64_t h = kh * G; h < (kh + 1) * G; ++h) {
          const T* P = att + (b * NH + h) * Tq * Tk;
          const size_t qo = size_t(b * Tq * ld + h * HS);
          const T* doh = dout + b * Tq * ldo + h * HS;
          const T beta = h == kh * G ? T(0) : T(1);
          for (int64_t i0 = 0; i0 < Tq; i0 += rb) {  // dP, dS, dQ by blocks of query rows
            const int64_t m = std::min(rb, Tq - i0), kend = last_key(i0 + m - 1, d, mask) + 1;
            T* dSb = dS + i0 * Tk;
            gemm<T>(Trans::N, Trans::N, m, kend, HS, T(1), doh + i0 * ldo, ldo, vt, Tk, T(0), dSb, Tk);  // dP
            for (int64_t i = i0; i < i0 + m; ++i) {  // softmax backward, folding in the 1/sqrt(HS) of S
              const int64_t last = last_key(i, d, mask);
              softmax_backward_row(P + i * Tk, dS + i * Tk, last, zeros_end(last, kend, Tk, cb), sc);
            }
            gemm<T>(Trans::N, Trans::N, m, HS, kend, T(1), dSb, Tk, k + ko, ldk, T(0), dq + qo + i0 * ld, ld);  // dQ
          }
          for (int64_t j0 = 0; j0 < Tk; j0 += cb) {  // dV, dK by blocks of key rows, from the first query seeing them
            const int64_t n = std::min(cb, Tk - j0), i0 = first_query(j0, d, mask), m = Tq - i0;
            T* dvb = dv + ko + j0 * ldk;
            T* dkb = dk + ko + j0 * ldk;
            if (m == 0) {  // keys no query sees (context parallel: after this rank's queries)
              if (beta == T(0))
                for (int64_t j = 0; j < n; ++j)
                  std::fill_n(dvb + j * ldk, HS, T(0)), std::fill_n(dkb + j * ldk, HS, T(0));
              continue;
            }
            gemm<T>(Trans::T, Trans::N, n, HS, m, T(1), P + i0 * Tk + j0, Tk, doh + i0 * ldo, ldo, beta, dvb,
                    ldk);  // dV (+)= P^T dO
            gemm<T>(Trans::T, Trans::N, n, HS, m, T(1), dS + i0 * Tk + j0, Tk, q + qo + i0 * ld, ld, beta, dkb,
                    ldk);  // dK (+)= dS^T Q
          }
        }
      }
  }
}

#define INSTANTIATE(T)                                                                                           \
  template void attention_forward<T>(const T*, const T*, const T*, T*, T*, const AttentionDims&, AttentionMask); \
  template void attention_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*,              \
                                      const AttentionDims&, AttentionMask);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
