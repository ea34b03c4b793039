// Fused softmax cross-entropy over a vocabulary (llm.c's fused classifier idea):
//   lse_r = log sum_v exp(logits_rv),  loss_r = lse_r - logits_r,target
//   dlogits_rv = dloss * (exp(logits_rv - lse_r) - [v == target])
// Probabilities are never stored: backward recomputes them from the saved
// logsumexp (N floats instead of N*V). Rows whose target is ignore_index get
// loss 0 and dlogits 0.
// bytes: forward 4*N*V, backward 8*N*V (fp32); flops ~ 3*N*V each.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vmath.h"

namespace eng::cpu {

template <typename T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* loss, T* lse, int64_t N, int64_t V,
                           int32_t ignore_index) {
#pragma omp parallel for if (N * V > 16384)
  for (int64_t r = 0; r < N; ++r) {
    const T* x = logits + r * V;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t v = 0; v < V; ++v) m = x[v] > m ? x[v] : m;
    T s = 0;
    if constexpr (std::is_same_v<T, float>)
      s = sum_exp_shift(x, V, m);  // libmvec's vector expf (vmath.h)
    else
      for (int64_t v = 0; v < V; ++v) s += std::exp(x[v] - m);
    lse[r] = m + std::log(s);
    loss[r] = targets[r] == ignore_index ? T(0) : lse[r] - x[targets[r]];
  }
}

template <typename T>
void cross_entropy_backward(const T* logits, const T* lse, const int32_t* targets, T dloss, T* dlogits, int64_t N,
                            int64_t V, int32_t ignore_index) {
#pragma omp parallel for if (N * V > 16384)
  for (int64_t r = 0; r < N; ++r) {
    const T* x = logits + r * V;
    T* d = dlogits + r * V;
    if (targets[r] == ignore_index) {
      for (int64_t v = 0; v < V; ++v) d[v] = 0;
      continue;
    }
    if constexpr (std::is_same_v<T, float>)
      scaled_exp_shift(x, d, V, lse[r], dloss);
    else
      for (int64_t v = 0; v < V; ++v) d[v] = dloss * std::exp(x[v] - lse[r]);
    d[targets[r]] -= dloss;
  }
}

template void cross_entropy_forward<float>(const float*, const int32_t*, float*, float*, int64_t, int64_t, int32_t);
template void cross_entropy_forward<double>(const double*, const int32_t*, double*, double*, int64_t, int64_t, int32_t);
template void cross_entropy_backward<float>(const float*, const float*, const int32_t*, float, float*, int64_t, int64_t,
                                            int32_t);
template void cross_entropy_backward<double>(const double*, const double*, const int32_t*, double, double*, int64_t,
                                             int64_t, int32_t);

}  // namespace eng::cpu
