// Inverted dropout with a counter-based mask: element i is kept when
// uniform(seed, offset + i) >= p, and scaled by 1/(1-p). Backward recomputes
// the same mask instead of storing it (no n-byte mask in memory).
// bytes: 8n each way (fp32); flops: ~10n (the hash) per pass.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/rng.h"

namespace eng::cpu {

template <typename T>
void dropout_forward(const T* x, T* out, int64_t n, double p, uint64_t seed, uint64_t offset) {
  const T keep_scale = T(1.0 / (1.0 - p));
#pragma omp parallel for if (n > 16384)
  for (int64_t i = 0; i < n; ++i)
    out[i] = rng::uniform(seed, offset + uint64_t(i)) >= float(p) ? x[i] * keep_scale : T(0);
}

template <typename T>
void dropout_backward(const T* dout, T* dx, int64_t n, double p, uint64_t seed, uint64_t offset) {
  dropout_forward(dout, dx, n, p, seed, offset);  // the same mask and scale
}

template void dropout_forward<float>(const float*, float*, int64_t, double, uint64_t, uint64_t);
template void dropout_forward<double>(const double*, double*, int64_t, double, uint64_t, uint64_t);
template void dropout_backward<float>(const float*, float*, int64_t, double, uint64_t, uint64_t);
template void dropout_backward<double>(const double*, double*, int64_t, double, uint64_t, uint64_t);

}  // namespace eng::cpu
