// GELU (tanh approximation, as GPT-2 and llm.c), ReLU and SwiGLU, forward and backward.
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3*0.044715 x^2)
// bytes: forward 8n, backward 12n (fp32); flops: ~20n forward, ~30n backward.
// SwiGLU (Shazeer 2020; Llama's MLP) on the packed gate|up projection, rows
// gu = [gate (H) | up (H)]:  out = silu(gate) up,  silu(g) = g sigmoid(g)
//   dgate = dout up sigmoid(g) (1 + g (1 - sigmoid(g))),  dup = dout silu(g)
// bytes: forward 12 N H, backward 20 N H (fp32); flops: ~8 N H forward, ~14 N H backward.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gelu_math.h"
#include "kernels/cpu/vmath.h"

namespace eng::cpu {

constexpr int64_t kParallelMin = 1 << 14;

// The formulas: gelu_math.h, shared with the fp32 loops of vmath.cpp.
constexpr auto kTanh = [](double v) { return std::tanh(v); };

// fp32 runs vmath.h's vectorized GELU on chunks of this many values, one
// chunk per OpenMP iteration.
constexpr int64_t kChunk = 4096;

template <typename T>
void gelu_forward(const T* x, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t c = 0; c < n; c += kChunk) gelu_forward_f32(x + c, out + c, std::min(kChunk, n - c));
    return;
  }
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = gelu::forward(double(x[i]), kTanh);
}

template <typename T>
void gelu_backward(const T* x, const T* dout, T* dx, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t c = 0; c < n; c += kChunk) gelu_backward_f32(x + c, dout + c, dx + c, std::min(kChunk, n - c));
    return;
  }
#pragma omp parallel for if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu::derivative(double(x[i]), kTanh) * dout[i];
}

template <typename T>
void relu_forward(const T* x, T* out, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] > T(0) ? x[i] : T(0);
}

template <typename T>
void relu_backward(const T* x, const T* dout, T* dx, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dout[i] : T(0);
}

template <typename T>
void swiglu_forward(const T* gu, T* out, int64_t N, int64_t H) {
#pragma omp parallel for if (N * H > kParallelMin)
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < H; ++c) {
      const T g = gu[r * 2 * H + c], u = gu[r * 2 * H + H + c];
      out[r * H + c] = g / (T(1) + std::exp(-g)) * u;
    }
}

template <typename T>
void swiglu_backward(const T* gu, const T* dout, T* dgu, int64_t N, int64_t H) {
#pragma omp parallel for if (N * H > kParallelMin)
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < H; ++c) {
      const T g = gu[r * 2 * H + c], u = gu[r * 2 * H + H + c], d = dout[r * H + c];
      const T s = T(1) / (T(1) + std::exp(-g));
      dgu[r * 2 * H + c] = d * u * (s * (T(1) + g * (T(1) - s)));
      dgu[r * 2 * H + H + c] = d * (g * s);
    }
}

#define INSTANTIATE(T)                                             \
  template void gelu_forward<T>(const T*, T*, int64_t);            \
  template void gelu_backward<T>(const T*, const T*, T*, int64_t); \
  template void relu_forward<T>(const T*, T*, int64_t);            \
  template void relu_backward<T>(const T*, const T*, T*, int64_t); \
  template void swiglu_forward<T>(const T*, T*, int64_t, int64_t); \
  template void swiglu_backward<T>(const T*, const T*, T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace eng::cpu
