// Fused multi-tensor 8-bit AdamW: dequantize -> AdamW update -> new block
// absmax -> requantize, every parameter in one launch.
// Reference: kernels/cpu/optim8bit.cpp (the same arithmetic in the same
// order, so emu matches it bit for bit); the maps and the method are in
// docs/optimizers.md.
//
// Layout: one CUDA block of 256 threads per quantization block of 256
// elements (thread i owns element i of it), grid-stride over the blocks of
// all tensors numbered consecutively (block_begin is the prefix sum); a
// quantization block's tensor is found by binary search over block_begin,
// once per block. The two maps (2 KB) are staged in shared memory; a
// block-wide max (warp shuffles, then the 8 warp maxima in shared memory,
// read by every thread) gives each moment's new absmax. max is exact in any
// order, so the result does not depend on the reduction's shape.
#include "kernels/cuda/adamw8bit.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256;
static_assert(kThreads == gpu::kQuantBlock, "one thread per element of a quantization block");

__device__ __forceinline__ int tensor_of_block(const gpu::Adam8bitTensor* d, int num_tensors, int64_t c) {
  int lo = 0, hi = num_tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (d[mid].block_begin <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The nearest entry of a sorted 256-entry map (ties: the lower), as
// cpu::quantize_nearest: 8 steps of binary search, then one comparison.
__device__ __forceinline__ uint8_t quantize_nearest(const float* map, float x) {
  int lo = 0;  // after the 8 halvings: the number of entries < x (conditional moves, no branches)
  for (int step = 128; step > 0; step /= 2) lo += map[lo + step - 1] < x ? step : 0;
  if (lo == 0) return 0;
  if (lo == 256) return 255;
  return uint8_t(x - map[lo - 1] <= map[lo] - x ? lo - 1 : lo);
}

// The max over the block's threads, returned to every thread. The first
// barrier keeps a previous call's readers ahead of this call's writers.
__device__ __forceinline__ float block_max_all(float x, float* warp_max) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = x;
  __syncthreads();
  float r = warp_max[0];
  for (int w = 1; w < kThreads / 32; ++w) r = fmaxf(r, warp_max[w]);
  return r;
}
}  // namespace

// Per element (torch.optim.AdamW's update on the dequantized moments):
//   m = smap[m8] am;  v = umap[v8] av;  g = grad (x grad_scale)
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p = p decay - step_size m / (sqrt(v) / sqrt_bc2 + eps)
//   am = max|m|, av = max v over the block;  m8 = nearest(m / am), v8 = nearest(v / av)
// Launch: grid_for(num_blocks, 1) blocks of 256 threads.
// bytes = 16 n + 16 n / 256 (read p, g, m8, v8; write p, m8, v8; the absmaxes);
// flops ~ 25 n.
__global__ void adamw8bit_multi_tensor_kernel(const gpu::Adam8bitTensor* __restrict__ tensors, int num_tensors,
                                              int64_t num_blocks, const float* __restrict__ maps, float beta1,
                                              float beta2, float eps, const float* __restrict__ grad_scale) {
  __shared__ float smap[256], umap[256], warp_max[kThreads / 32];
  smap[threadIdx.x] = maps[threadIdx.x];
  umap[threadIdx.x] = maps[256 + threadIdx.x];
  __syncthreads();
  const float gs = grad_scale ? *grad_scale : 1.f;
  for (int64_t c = blockIdx.x; c < num_blocks; c += gridDim.x) {
    const gpu::Adam8bitTensor& d = tensors[tensor_of_block(tensors, num_tensors, c)];
    const int64_t b = c - d.block_begin, i = b * gpu::kQuantBlock + threadIdx.x;
    const bool active = i < d.n;
    float m = 0.f, v = 0.f;
    if (active) {
      const float g = grad_scale ? d.grad[i] * gs : d.grad[i];
      m = smap[d.m8[i]] * d.m_absmax[b];
      v = umap[d.v8[i]] * d.v_absmax[b];
      m = beta1 * m + (1.f - beta1) * g;
      v = beta2 * v + (1.f - beta2) * g * g;
      d.param[i] = d.param[i] * d.decay - d.step_size * m / (sqrtf(v) / d.sqrt_bc2 + eps);
    }
    // Every thread has read the old absmax before thread 0 writes the new.
    const float am = block_max_all(fabsf(m), warp_max), av = block_max_all(v, warp_max);
    if (threadIdx.x == 0) d.m_absmax[b] = am, d.v_absmax[b] = av;
    if (active) {
      d.m8[i] = quantize_nearest(smap, am > 0.f ? m / am : 0.f);
      d.v8[i] = quantize_nearest(umap, av > 0.f ? v / av : 0.f);
    }
  }
}

void adamw8bit_multi_tensor(const gpu::Adam8bitTensor* d_tensors, int num_tensors, int64_t num_blocks,
                            const float* d_maps, float beta1, float beta2, float eps, const float* grad_scale,
                            void* stream) {
  if (num_tensors == 0 || num_blocks == 0) return;
  LAUNCH_KERNEL(adamw8bit_multi_tensor_kernel, grid_for(num_blocks, 1), kThreads, 0, as_stream(stream), d_tensors,
                num_tensors, num_blocks, d_maps, beta1, beta2, eps, grad_scale);
}

}  // namespace eng::ENGINE_GPU_NS
