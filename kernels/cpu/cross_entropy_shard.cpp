// Softmax cross-entropy over a vocabulary split across ranks: the plain
// reference of kernels/cuda/cross_entropy_shard.cu (formulas in its header).
// logits (N, V) are columns [start, start + V) of the full logits, of which
// the first Vv are real ids. Statistics in the tensor's type T; fp32's exps
// through libmvec's vector expf (vmath.h), double's through std::exp.
// bytes: stats N Vv sizeof(T), backward 2 N V sizeof(T); flops ~ 3 N Vv each.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vmath.h"

namespace eng::cpu {

template <typename T>
void ce_shard_stats(const T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vv, int64_t start, T* m,
                    T* s, T* t) {
#pragma omp parallel for if (N * Vv > 16384)
  for (int64_t r = 0; r < N; ++r) {
    const T* x = logits + r * V;
    T mx = -std::numeric_limits<T>::infinity(), sum = 0;
    for (int64_t v = 0; v < Vv; ++v) mx = x[v] > mx ? x[v] : mx;
    if constexpr (std::is_same_v<T, float>) {
      sum = sum_exp_shift(x, Vv, mx);  // libmvec's vector expf (vmath.h)
    } else {
      for (int64_t v = 0; v < Vv; ++v) sum += std::exp(x[v] - mx);
    }
    const int64_t local = int64_t(targets[r]) - start;
    m[r] = mx;
    s[r] = sum;
    t[r] = local >= 0 && local < Vv ? x[local] : T(0);
  }
}

template <typename T>
void ce_shard_rescale(const T* m, const T* M, T* s, int64_t N) {
  for (int64_t r = 0; r < N; ++r) s[r] = std::isinf(m[r]) && m[r] < 0 ? T(0) : s[r] * std::exp(m[r] - M[r]);
}

template <typename T>
void ce_shard_finish(const T* M, const T* S, const T* Tg, const int32_t* targets, int64_t N, int32_t ignore_index,
                     T* losses, T* lse) {
  for (int64_t r = 0; r < N; ++r) {
    lse[r] = M[r] + std::log(S[r]);
    losses[r] = targets[r] == ignore_index ? T(0) : lse[r] - Tg[r];
  }
}

template <typename T>
void ce_shard_backward(const T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V, int64_t Vv,
                       int64_t start, int32_t ignore_index, T scale, T* d) {
#pragma omp parallel for if (N * V > 16384)
  for (int64_t r = 0; r < N; ++r) {
    const T* x = logits + r * V;
    T* dr = d + r * V;
    const bool ignored = targets[r] == ignore_index;
    const int64_t local = int64_t(targets[r]) - start;
    if constexpr (std::is_same_v<T, float>) {
      if (ignored) {
        std::fill(dr, dr + V, T(0));
        continue;
      }
      scaled_exp_shift(x, dr, Vv, lse[r], scale);  // scale * softmax, vectorized (vmath.h)
      if (local >= 0 && local < Vv) dr[local] -= scale;
      std::fill(dr + Vv, dr + V, T(0));
      continue;
    }
    for (int64_t v = 0; v < V; ++v)
      dr[v] = ignored || v >= Vv ? T(0) : scale * (std::exp(x[v] - lse[r]) - (v == local ? T(1) : T(0)));
  }
}

#define INSTANTIATE(T)                                                                                                \
  template void ce_shard_stats<T>(const T*, const int32_t*, int64_t, int64_t, int64_t, int64_t, T*, T*, T*);          \
  template void ce_shard_rescale<T>(const T*, const T*, T*, int64_t);                                                 \
  template void ce_shard_finish<T>(const T*, const T*, const T*, const int32_t*, int64_t, int32_t, T*, T*);           \
  template void ce_shard_backward<T>(const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, int64_t, int32_t, \
                                     T, T*);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
