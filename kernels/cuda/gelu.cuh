// GELU, tanh form (GPT-2, llm.c), as fp32 device functions. One definition
// for every kernel that applies it: activation.cu's elementwise GELU and the
// GEMM's GELU epilogue (gemm.cu). Sharing the expression is what makes the
// fused linear+GELU bit-identical to linear then gelu on the emu device.
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3*0.044715 x^2)
// Reference: kernels/cpu/activation.cpp. flops ~ 20 (gelu), ~30 (gelu'),
// tanhf counted as ~10.
#pragma once
#include "kernels/cuda/portable.cuh"

namespace eng::ENGINE_GPU_NS {

inline constexpr float kSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCoef = 0.044715f;

__device__ __forceinline__ float gelu_f(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCoef * x * x * x);
  return 0.5f * x * (1.f + tanhf(u));
}

__device__ __forceinline__ float gelu_grad_f(float x, float dout) {
  const float u = kSqrt2OverPi * (x + kGeluCoef * x * x * x);
  const float th = tanhf(u);
  const float du = kSqrt2OverPi * (1.f + 3.f * kGeluCoef * x * x);
  return dout * (0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * du);
}

}  // namespace eng::ENGINE_GPU_NS
