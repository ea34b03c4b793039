// Causal multi-head self-attention, the plain three-step reference
// (llm.c's attention_forward_cpu): per batch b and head h,
//   S = Q K^T / sqrt(HS)  (T x T, keys j > query i masked)
//   P = softmax(S) row-wise          (saved in att for backward)
//   O = P V
// backward: dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P));
//           dQ = dS K / sqrt(HS); dK = dS^T Q / sqrt(HS)
// Layout: q, k, v, out are (B, T, NH, HS): element (b, t, h, d) sits at
// ((b*T + t)*NH + h)*HS + d. att is (B, NH, T, T).
// flops: forward ~ 2 * B*NH*T*T*HS (causal half of 4*...), backward ~ 2x that.
// bytes: 4*(4*B*T*NH*HS) + 4*B*NH*T*T (the T x T matrix the fused kernel avoids).
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* att, int64_t B, int64_t Tn, int64_t NH,
                       int64_t HS) {
  const int64_t C = NH * HS;
  const T sc = T(1) / std::sqrt(T(HS));
#pragma omp parallel for collapse(2) if (B * NH * Tn > 64)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < Tn; ++i) {
        const T* qi = q + (b * Tn + i) * C + h * HS;
        T* pi = att + ((b * NH + h) * Tn + i) * Tn;
        T m = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const T* kj = k + (b * Tn + j) * C + h * HS;
          T s = 0;
          for (int64_t d = 0; d < HS; ++d) s += qi[d] * kj[d];
          pi[j] = s * sc;
          m = pi[j] > m ? pi[j] : m;
        }
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          pi[j] = std::exp(pi[j] - m);
          sum += pi[j];
        }
        const T inv = T(1) / sum;
        for (int64_t j = 0; j <= i; ++j) pi[j] *= inv;
        for (int64_t j = i + 1; j < Tn; ++j) pi[j] = 0;
        T* oi = out + (b * Tn + i) * C + h * HS;
        for (int64_t d = 0; d < HS; ++d) oi[d] = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const T* vj = v + (b * Tn + j) * C + h * HS;
          for (int64_t d = 0; d < HS; ++d) oi[d] += pi[j] * vj[d];
        }
      }
}

template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* att, T* dq, T* dk, T* dv, int64_t B,
                        int64_t Tn, int64_t NH, int64_t HS) {
  const int64_t C = NH * HS;
  const T sc = T(1) / std::sqrt(T(HS));
  for (int64_t i = 0; i < B * Tn * C; ++i) dq[i] = dk[i] = dv[i] = 0;
    // Each (b, h) pair touches only its own head's slices of dq/dk/dv, so the
    // pairs run in parallel without atomics.
#pragma omp parallel for collapse(2) if (B * NH * Tn > 64)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < Tn; ++i) {
        const T* pi = att + ((b * NH + h) * Tn + i) * Tn;
        const T* doi = dout + (b * Tn + i) * C + h * HS;
        const T* qi = q + (b * Tn + i) * C + h * HS;
        T* dqi = dq + (b * Tn + i) * C + h * HS;
        // dP_ij = dO_i . V_j, and the softmax backward needs sum_j P_ij dP_ij.
        T dot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          const T* vj = v + (b * Tn + j) * C + h * HS;
          T dp = 0;
          for (int64_t d = 0; d < HS; ++d) dp += doi[d] * vj[d];
          dot += pi[j] * dp;
        }
        for (int64_t j = 0; j <= i; ++j) {
          const T* vj = v + (b * Tn + j) * C + h * HS;
          const T* kj = k + (b * Tn + j) * C + h * HS;
          T* dvj = dv + (b * Tn + j) * C + h * HS;
          T* dkj = dk + (b * Tn + j) * C + h * HS;
          T dp = 0;
          for (int64_t d = 0; d < HS; ++d) dp += doi[d] * vj[d];
          const T ds = pi[j] * (dp - dot) * sc;
          for (int64_t d = 0; d < HS; ++d) {
            dvj[d] += pi[j] * doi[d];
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
          }
        }
      }
}

template void attention_forward<float>(const float*, const float*, const float*, float*, float*, int64_t, int64_t,
                                       int64_t, int64_t);
template void attention_forward<double>(const double*, const double*, const double*, double*, double*, int64_t, int64_t,
                                        int64_t, int64_t);
template void attention_backward<float>(const float*, const float*, const float*, const float*, const float*, float*,
                                        float*, float*, int64_t, int64_t, int64_t, int64_t);
template void attention_backward<double>(const double*, const double*, const double*, const double*, const double*,
                                         double*, double*, double*, int64_t, int64_t, int64_t, int64_t);

}  // namespace eng::cpu
