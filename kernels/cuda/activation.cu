// GELU, tanh form (GPT-2), forward and backward, as functors run by the
// shared elementwise kernels (elementwise.cuh); the math is gelu.cuh's, which
// the GEMM's GELU epilogue shares. Reference: kernels/cpu/activation.cpp.
// Launch (elementwise.cuh): 1-D grid-stride loop, 256 threads. Each thread
// moves whole 16-byte packs (4 floats or 8 bf16) when every pointer is
// 16-byte aligned; the last n % pack elements (or all, if unaligned) go one by one.
// Memory bound: bytes = 2 n sizeof(T) forward, 3 n sizeof(T) backward;
// flops ~ 20 n forward, ~30 n backward (tanhf counted as ~10).
#include "kernels/cuda/activation.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gelu.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
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
