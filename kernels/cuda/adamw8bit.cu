// Fused multi-tensor 8-bit AdamW: dequantize -> AdamW update -> new block
// absmax -> requantize, every parameter in one launch.
// Reference: kernels/cpu/optim8bit.cpp (the same arithmetic in the same
// order, so emu matches it bit for bit); the maps and the method are in
// docs/optimizers.md.
//
// Layout: one warp per quantization block of 256 elements, lane l owning
// elements 8l .. 8l + 7 of it, eight warps (eight quantization blocks) to a
// CUDA block, warps grid-striding over the blocks of all tensors numbered
// consecutively (block_begin is the prefix sum); a quantization block's
// tensor is found by binary search over block_begin, once per block. A lane
// moves its 8 elements with two 16-byte loads of p and of g and one 8-byte
// load of each code array where the tensor's pointers are aligned (else
// element by element): 80 bytes in flight a lane, where one element a
// thread (the first version: a CUDA block a quantization block, its maxima
// through shared memory, two barriers each) had 10 and measured 18% of HBM.
// A moment's new absmax is a warp max (shuffles, no barrier); max is exact
// in any order, so the result does not depend on the reduction's shape.
// Lane 0 alone reads and writes the block's absmaxes (the old ones reach
// the other lanes by a shuffle), so no lane reads what another writes.
// The two maps (2 KB) are staged in shared memory.
#include "kernels/cuda/adamw8bit.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256, kWarps = kThreads / 32, kPerLane = 8;
static_assert(32 * kPerLane == gpu::kQuantBlock, "a warp per quantization block");
constexpr unsigned kFull = 0xffffffffu;

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

__device__ __forceinline__ float warp_max_all(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(kFull, x, o));
  return x;
}

struct alignas(8) Codes8 {
  uint8_t v[kPerLane];
};
}  // namespace

// Per element (torch.optim.AdamW's update on the dequantized moments):
//   m = smap[m8] am;  v = umap[v8] av;  g = grad (x grad_scale)
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p = p decay - step_size m / (sqrt(v) / sqrt_bc2 + eps)
//   am = max|m|, av = max v over the block;  m8 = nearest(m / am), v8 = nearest(v / av)
// Launch: grid_for(num_blocks, kWarps) blocks of 256 threads.
// bytes = 16 n + 16 n / 256 (read p, g, m8, v8; write p, m8, v8; the absmaxes);
// flops ~ 25 n.
__global__ void adamw8bit_multi_tensor_kernel(const gpu::Adam8bitTensor* __restrict__ tensors, int num_tensors,
                                              int64_t num_blocks, const float* __restrict__ maps, float beta1,
                                              float beta2, float eps, const float* __restrict__ grad_scale) {
  __shared__ float smap[256], umap[256];
  for (int i = int(threadIdx.x); i < 256; i += kThreads) smap[i] = maps[i], umap[i] = maps[256 + i];
  __syncthreads();
  const float gs = grad_scale ? *grad_scale : 1.f;
  const int lane = int(threadIdx.x) % 32;
  for (int64_t c = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; c < num_blocks; c += int64_t(gridDim.x) * kWarps) {
    const gpu::Adam8bitTensor& d = tensors[tensor_of_block(tensors, num_tensors, c)];
    const int64_t b = c - d.block_begin, first = b * gpu::kQuantBlock + lane * kPerLane;
    const int count = d.n - first >= kPerLane ? kPerLane : d.n > first ? int(d.n - first) : 0;
    float old_am = lane == 0 ? d.m_absmax[b] : 0.f, old_av = lane == 0 ? d.v_absmax[b] : 0.f;
    old_am = __shfl_sync(kFull, old_am, 0), old_av = __shfl_sync(kFull, old_av, 0);
    // The lane's elements: whole and aligned, in wide loads; else one by one.
    const bool wide = count == kPerLane && aligned_to(d.param + first, 16) && aligned_to(d.grad + first, 16) &&
                      aligned_to(d.m8 + first, 8) && aligned_to(d.v8 + first, 8);
    float p[kPerLane], g[kPerLane], m[kPerLane], v[kPerLane];
    Codes8 m8{}, v8{};
    if (wide) {
      for (int h = 0; h < kPerLane; h += 4) {
        const Pack128<float> pp = load128(d.param + first + h), gp = load128(d.grad + first + h);
        for (int k = 0; k < 4; ++k) p[h + k] = pp.v[k], g[h + k] = gp.v[k];
      }
      m8 = load_wide<Codes8>(d.m8 + first);
      v8 = load_wide<Codes8>(d.v8 + first);
    } else {
      for (int k = 0; k < kPerLane; ++k) {
        p[k] = k < count ? d.param[first + k] : 0.f;
        g[k] = k < count ? d.grad[first + k] : 0.f;
        m8.v[k] = k < count ? d.m8[first + k] : 0;
        v8.v[k] = k < count ? d.v8[first + k] : 0;
      }
    }
    float am = 0.f, av = 0.f;
    for (int k = 0; k < kPerLane; ++k) {
      if (k >= count) {  // past the tensor's end: 0 in both maxima, as the cpu's block stops there
        m[k] = v[k] = 0.f;
        continue;
      }
      const float gk = grad_scale ? g[k] * gs : g[k];
      m[k] = smap[m8.v[k]] * old_am;
      v[k] = umap[v8.v[k]] * old_av;
      m[k] = beta1 * m[k] + (1.f - beta1) * gk;
      v[k] = beta2 * v[k] + (1.f - beta2) * gk * gk;
      p[k] = p[k] * d.decay - d.step_size * m[k] / (sqrtf(v[k]) / d.sqrt_bc2 + eps);
      am = fmaxf(am, fabsf(m[k]));
      av = fmaxf(av, v[k]);
    }
    am = warp_max_all(am), av = warp_max_all(av);
    if (lane == 0) d.m_absmax[b] = am, d.v_absmax[b] = av;
    for (int k = 0; k < kPerLane; ++k) {
      m8.v[k] = quantize_nearest(smap, am > 0.f ? m[k] / am : 0.f);
      v8.v[k] = quantize_nearest(umap, av > 0.f ? v[k] / av : 0.f);
    }
    if (wide) {
      for (int h = 0; h < kPerLane; h += 4) {
        Pack128<float> pp;
        for (int k = 0; k < 4; ++k) pp.v[k] = p[h + k];
        store128(d.param + first + h, pp);
      }
      store_wide(d.m8 + first, m8);
      store_wide(d.v8 + first, v8);
    } else {
      for (int k = 0; k < kPerLane; ++k)  // a fixed count, unrolled: the arrays stay in registers
        if (k < count) d.param[first + k] = p[k], d.m8[first + k] = m8.v[k], d.v8[first + k] = v8.v[k];
    }
  }
}

void adamw8bit_multi_tensor(const gpu::Adam8bitTensor* d_tensors, int num_tensors, int64_t num_blocks,
                            const float* d_maps, float beta1, float beta2, float eps, const float* grad_scale,
                            void* stream) {
  if (num_tensors == 0 || num_blocks == 0) return;
  LAUNCH_KERNEL(adamw8bit_multi_tensor_kernel, grid_for(num_blocks, kWarps), kThreads, 0, as_stream(stream), d_tensors,
                num_tensors, num_blocks, d_maps, beta1, beta2, eps, grad_scale);
}

}  // namespace eng::ENGINE_GPU_NS
