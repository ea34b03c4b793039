// attention_delta_kernel, shared by the CUDA-core attention backward
// (attention.cu) and the tensor-core one (attention_mma_backward.cu): D =
// rowsum(dO * O) per (b, t, h), the softmax backward's dot product, computed
// once instead of once per key tile. In an anonymous namespace: each file
// that launches it gets its own copy of the kernel (no cross-file device
// symbol).
// Launch: 128 threads (a warp per row), grid_for(rows, 4), grid-stride;
// rows = B*Tq*NH. bytes = 2 B Tq NH HS sizeof(T) + 4 B NH Tq; flops = 2 B Tq NH HS.
#pragma once
#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {
namespace {
template <typename T>
__global__ void attention_delta_kernel(const T* __restrict__ dout, const T* __restrict__ out, float* __restrict__ delta,
                                       int64_t rows, int Tn, int NH, int hs) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    float s = 0.f;
    for (int d = lane; d < hs; d += 32) s += to_f32(dout[row * hs + d]) * to_f32(out[row * hs + d]);
    s = rowwise::warp_sum(s);
    if (lane == 0) {
      const int64_t b = row / (int64_t(Tn) * NH), t = (row / NH) % Tn, h = row % NH;
      delta[(b * NH + h) * Tn + t] = s;
    }
  }
}
}  // namespace
}  // namespace eng::ENGINE_GPU_NS
