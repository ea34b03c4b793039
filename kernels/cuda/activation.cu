// GELU, tanh form (GPT-2), forward and backward, as functors run by the
// shared elementwise kernels (elementwise.cuh). Reference: kernels/cpu/activation.cpp.
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3*0.044715 x^2)
// Launch (elementwise.cuh): 1-D grid-stride loop, 256 threads. Each thread
// moves whole 16-byte packs (4 floats or 8 bf16) when every pointer is
// 16-byte aligned; the last n % pack elements (or all, if unaligned) go one by one.
// Memory bound: bytes = 2 n sizeof(T) forward, 3 n sizeof(T) backward;
// flops ~ 20 n forward, ~30 n backward (tanhf counted as ~10).
#include "kernels/cuda/activation.h"
#include "kernels/cuda/elementwise.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;

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

struct GeluOp {
  __device__ __forceinline__ float operator()(float x) const { return gelu_f(x); }
};
struct GeluGradOp {  // (x, dout) -> dx
  __device__ __forceinline__ float operator()(float x, float dout) const { return gelu_grad_f(x, dout); }
};
}  // namespace

void gelu_forward(gpu::Storage st, const void* x, void* out, int64_t n, void* stream) {
  launch_unary(st, x, out, n, stream, GeluOp{});
}

void gelu_backward(gpu::Storage st, const void* x, const void* dout, void* dx, int64_t n, void* stream) {
  launch_binary(st, x, dout, dx, n, stream, GeluGradOp{});
}

}  // namespace eng::ENGINE_GPU_NS
