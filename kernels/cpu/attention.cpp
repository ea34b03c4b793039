// Multi-head self-attention, causal or not, the plain three-step reference
// (llm.c's attention_forward_cpu, with its matrix products done by GEMMs):
// per batch b and head h, with Q, K, V the (T, HS) slices of that head,
//   S = Q K^T / sqrt(HS)  (T x T; AttentionMask::causal masks keys j > query i,
//                          ::none masks nothing)
//   P = softmax(S) row-wise          (saved in att for backward)
//   O = P V
// backward: dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P));
//           dQ = dS K / sqrt(HS); dK = dS^T Q / sqrt(HS)
// Layout: q, k, v, out are (B, T, NH, HS): element (b, t, h, d) sits at
// ((b*T + t)*NH + h)*HS + d, so a head's slice is strided; it is gathered
// into contiguous (T, HS) buffers for the GEMMs. att is (B, NH, T, T).
// flops: forward 4*B*NH*T*T*HS (causal: the GEMMs also compute the masked
//        half), backward 8*B*NH*T*T*HS; the same for both masks.
// bytes: 4*(4*B*T*NH*HS) + 4*B*NH*T*T per pass (fp32): the T x T matrix is
// the traffic the fused CUDA kernel avoids.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/gemm/gemm.h"

namespace eng::cpu {

namespace {
// Copies head h of rows (b, 0..T) between the (B, T, NH, HS) layout and a
// contiguous (T, HS) buffer.
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
int64_t last_key(int64_t i, int64_t Tn, AttentionMask mask) { return mask == AttentionMask::causal ? i : Tn - 1; }
}  // namespace

template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* att, int64_t B, int64_t Tn, int64_t NH,
                       int64_t HS, AttentionMask mask) {
  const T sc = T(1) / std::sqrt(T(HS));
  // Each (b, h) is independent; the GEMMs inside run single-threaded there.
#pragma omp parallel
  {
    std::vector<T> qh(size_t(Tn * HS)), kh(size_t(Tn * HS)), vh(size_t(Tn * HS)), oh(size_t(Tn * HS));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        T* P = att + (b * NH + h) * Tn * Tn;
        gather_head(q, qh.data(), b, h, Tn, NH, HS);
        gather_head(k, kh.data(), b, h, Tn, NH, HS);
        gather_head(v, vh.data(), b, h, Tn, NH, HS);
        gemm<T>(Trans::N, Trans::T, Tn, Tn, HS, sc, qh.data(), HS, kh.data(), HS, T(0), P, Tn);  // S
        for (int64_t i = 0; i < Tn; ++i) {  // softmax of row i over keys 0..last, 0 after
          T* row = P + i * Tn;
          const int64_t last = last_key(i, Tn, mask);
          T m = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j <= last; ++j) m = row[j] > m ? row[j] : m;
          T sum = 0;
          for (int64_t j = 0; j <= last; ++j) {
            row[j] = std::exp(row[j] - m);
            sum += row[j];
          }
          const T inv = T(1) / sum;
          for (int64_t j = 0; j <= last; ++j) row[j] *= inv;
          for (int64_t j = last + 1; j < Tn; ++j) row[j] = 0;
        }
        gemm<T>(Trans::N, Trans::N, Tn, HS, Tn, T(1), P, Tn, vh.data(), HS, T(0), oh.data(), HS);  // O = P V
        scatter_head(oh.data(), out, b, h, Tn, NH, HS);
      }
  }
}

template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* att, T* dq, T* dk, T* dv, int64_t B,
                        int64_t Tn, int64_t NH, int64_t HS, AttentionMask mask) {
  const T sc = T(1) / std::sqrt(T(HS));
#pragma omp parallel
  {
    const size_t n = size_t(Tn * HS);
    std::vector<T> qh(n), kh(n), vh(n), doh(n), dqh(n), dkh(n), dvh(n), dS(size_t(Tn * Tn));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h) {
        const T* P = att + (b * NH + h) * Tn * Tn;
        gather_head(q, qh.data(), b, h, Tn, NH, HS);
        gather_head(k, kh.data(), b, h, Tn, NH, HS);
        gather_head(v, vh.data(), b, h, Tn, NH, HS);
        gather_head(dout, doh.data(), b, h, Tn, NH, HS);
        gemm<T>(Trans::T, Trans::N, Tn, HS, Tn, T(1), P, Tn, doh.data(), HS, T(0), dvh.data(), HS);  // dV = P^T dO
        gemm<T>(Trans::N, Trans::T, Tn, Tn, HS, T(1), doh.data(), HS, vh.data(), HS, T(0), dS.data(), Tn);  // dP
        for (int64_t i = 0; i < Tn; ++i) {  // softmax backward, folding in the 1/sqrt(HS) of S
          const T* p = P + i * Tn;
          T* ds = dS.data() + i * Tn;
          const int64_t last = last_key(i, Tn, mask);
          T dot = 0;
          for (int64_t j = 0; j <= last; ++j) dot += p[j] * ds[j];
          for (int64_t j = 0; j < Tn; ++j) ds[j] = j <= last ? p[j] * (ds[j] - dot) * sc : T(0);
        }
        gemm<T>(Trans::N, Trans::N, Tn, HS, Tn, T(1), dS.data(), Tn, kh.data(), HS, T(0), dqh.data(), HS);  // dQ
        gemm<T>(Trans::T, Trans::N, Tn, HS, Tn, T(1), dS.data(), Tn, qh.data(), HS, T(0), dkh.data(), HS);  // dK
        scatter_head(dqh.data(), dq, b, h, Tn, NH, HS);
        scatter_head(dkh.data(), dk, b, h, Tn, NH, HS);
        scatter_head(dvh.data(), dv, b, h, Tn, NH, HS);
      }
  }
}

#define INSTANTIATE(T)                                                                                                \
  template void attention_forward<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t,        \
                                     AttentionMask);                                                                  \
  template void attention_backward<T>(const T*, const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, int64_t, \
                                      int64_t, int64_t, AttentionMask);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
