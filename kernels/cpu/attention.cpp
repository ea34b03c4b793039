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
// Self-attention is Tq = Tk, q_offset 0; context parallelism gives each rank
// its slice of the queries (q_offset = its first position) against every
// key, gathered.
// Layout: q, out are (B, Tq, NH, HS), k, v (B, Tk, NH, HS): element (b, t,
// h, d) sits at ((b*T + t)*NH + h)*HS + d, so a head's slice is strided; it
// is gathered into contiguous buffers for the GEMMs. att is (B, NH, Tq, Tk).
// flops: forward 4*B*NH*Tq*Tk*HS (causal: the GEMMs also compute the masked
//        part), backward 8*B*NH*Tq*Tk*HS; the same for both masks.
// bytes: 4*(2*B*Tq*NH*HS + 2*B*Tk*NH*HS) + 4*B*NH*Tq*Tk per pass (fp32): the
// Tq x Tk matrix is the traffic the fused CUDA kernel avoids.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vmath.h"
#include "kernels/gemm/gemm.h"

namespace eng::cpu {

namespace {
// Copies head h of rows (b, 0..Tn) between the (B, Tn, NH, HS) layout and a
// contiguous (Tn, HS) buffer.
template <typename T>
void gather_head(const T* src, T* dst, int64_t b, int64_t h, int64_t Tn, int64_t NH, int64_t HS) {
  for (int64_t t = 0; t < Tn; ++t)
    for (int64_t d = 0; d < HS; ++d) dst[t * HS + d] = src[((b * Tn + t) * NH + h) * HS + d];
}
template <typename T>
void scatter_head(const T* src, T* dst, int64_t b, int64_t h, int64_t Tn, int64_t NH, int64_t HS) {
  for (int64_t t = 0; t < Tn; ++t)
    for (int64_t d = 0; d < HS; ++d) dst[((b * Tn + t) * NH + h) * HS + d] = src[t * HS + d];
}

// The last key that query i sees.
int64_t last_key(int64_t i, const AttentionDims& d, AttentionMask mask) {
  return mask == AttentionMask::causal ? d.q_offset + i : d.Tk - 1;
}
}  // namespace

template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* att, const AttentionDims& d, AttentionMask mask) {
  const int64_t B = d.B, Tq = d.Tq, Tk = d.Tk, NH = d.NH, HS = d.HS;
  const T sc = T(1) / std::sqrt(T(HS));
  // Each (b, h) is independent; the GEMMs inside run single-threaded there.
#pragma omp parallel
  {
    std::vector<T> qh(size_t(Tq * HS)), kh(size_t(Tk * HS)), vh(size_t(Tk * HS)), oh(size_t(Tq * HS));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        T* P = att + (b * NH + h) * Tq * Tk;
        gather_head(q, qh.data(), b, h, Tq, NH, HS);
        gather_head(k, kh.data(), b, h, Tk, NH, HS);
        gather_head(v, vh.data(), b, h, Tk, NH, HS);
        gemm<T>(Trans::N, Trans::T, Tq, Tk, HS, sc, qh.data(), HS, kh.data(), HS, T(0), P, Tk);  // S
        for (int64_t i = 0; i < Tq; ++i) {  // softmax of row i over keys 0..last, 0 after
          T* row = P + i * Tk;
          const int64_t last = last_key(i, d, mask);
          T m = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j <= last; ++j) m = row[j] > m ? row[j] : m;
          T sum = 0;
          if constexpr (std::is_same_v<T, float>) {
            sum = exp_shift_sum(row, row, last + 1, m);  // libmvec's vector expf (vmath.h)
          } else {
            for (int64_t j = 0; j <= last; ++j) {
              row[j] = std::exp(row[j] - m);
              sum += row[j];
            }
          }
          const T inv = T(1) / sum;
          for (int64_t j = 0; j <= last; ++j) row[j] *= inv;
          for (int64_t j = last + 1; j < Tk; ++j) row[j] = 0;
        }
        gemm<T>(Trans::N, Trans::N, Tq, HS, Tk, T(1), P, Tk, vh.data(), HS, T(0), oh.data(), HS);  // O = P V
        scatter_head(oh.data(), out, b, h, Tq, NH, HS);
      }
  }
}

template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* att, T* dq, T* dk, T* dv,
                        const AttentionDims& d, AttentionMask mask) {
  const int64_t B = d.B, Tq = d.Tq, Tk = d.Tk, NH = d.NH, HS = d.HS;
  const T sc = T(1) / std::sqrt(T(HS));
#pragma omp parallel
  {
    const size_t nq = size_t(Tq * HS), nk = size_t(Tk * HS);
    std::vector<T> qh(nq), kh(nk), vh(nk), doh(nq), dqh(nq), dkh(nk), dvh(nk), dS(size_t(Tq * Tk));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        const T* P = att + (b * NH + h) * Tq * Tk;
        gather_head(q, qh.data(), b, h, Tq, NH, HS);
        gather_head(k, kh.data(), b, h, Tk, NH, HS);
        gather_head(v, vh.data(), b, h, Tk, NH, HS);
        gather_head(dout, doh.data(), b, h, Tq, NH, HS);
        gemm<T>(Trans::T, Trans::N, Tk, HS, Tq, T(1), P, Tk, doh.data(), HS, T(0), dvh.data(), HS);  // dV = P^T dO
        gemm<T>(Trans::N, Trans::T, Tq, Tk, HS, T(1), doh.data(), HS, vh.data(), HS, T(0), dS.data(), Tk);  // dP
        for (int64_t i = 0; i < Tq; ++i) {  // softmax backward, folding in the 1/sqrt(HS) of S
          const T* p = P + i * Tk;
          T* ds = dS.data() + i * Tk;
          const int64_t last = last_key(i, d, mask);
          T dot = 0;
          for (int64_t j = 0; j <= last; ++j) dot += p[j] * ds[j];
          for (int64_t j = 0; j < Tk; ++j) ds[j] = j <= last ? p[j] * (ds[j] - dot) * sc : T(0);
        }
        gemm<T>(Trans::N, Trans::N, Tq, HS, Tk, T(1), dS.data(), Tk, kh.data(), HS, T(0), dqh.data(), HS);  // dQ
        gemm<T>(Trans::T, Trans::N, Tk, HS, Tq, T(1), dS.data(), Tk, qh.data(), HS, T(0), dkh.data(), HS);  // dK
        scatter_head(dqh.data(), dq, b, h, Tq, NH, HS);
        scatter_head(dkh.data(), dk, b, h, Tk, NH, HS);
        scatter_head(dvh.data(), dv, b, h, Tk, NH, HS);
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
