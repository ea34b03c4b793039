// Fused multi-tensor AdamW and the global gradient sum of squares.
// Reference: kernels/cpu/optim.cpp (adamw_step, sum_squares); the walk from
// one launch per tensor to this one is in docs/kernels/adamw.md.
//
// Multi-tensor layout: the engine lists every tensor in a device array of
// descriptors (kernels/cuda/adamw.h), each cut into chunks of
// kMultiTensorChunk elements numbered consecutively across tensors
// (chunk_begin is the prefix sum of the chunk counts). Blocks take chunks in
// a grid-stride loop and find a chunk's tensor by binary search over
// chunk_begin (log2(tensors) reads, once per chunk, not per element). Inside
// a chunk, thread i touches elements i, i + 256, ...: coalesced 4-byte
// accesses, which already saturate DRAM bandwidth for this streaming kernel.
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256;

// The tensor holding chunk c: the last descriptor with chunk_begin <= c.
template <typename Desc>
__device__ __forceinline__ int tensor_of_chunk(const Desc* d, int num_tensors, int64_t c) {
  int lo = 0, hi = num_tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (d[mid].chunk_begin <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float load_as_f32(const void* p, gpu::Storage st, int64_t i) {
  switch (st) {
    case gpu::Storage::bf16:
      return to_f32(static_cast<const __nv_bfloat16*>(p)[i]);
    case gpu::Storage::f16:
      return to_f32(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}
}  // namespace

// One AdamW step over every parameter (torch.optim.AdamW, per element):
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p = p (1 - lr wd) - (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
// and, if param_bf16 is set, param_bf16 = bf16(p) from the same register.
// Launch: grid_for(num_chunks, 1) blocks of 256 threads, grid-stride over chunks.
// Preconditions: descriptors sorted by chunk_begin, chunk_begin[0] = 0, every
// n >= 1; tensors do not overlap.
// bytes = 28 n (read p, g, m, v; write p, m, v; fp32) + 2 n for the bf16 copy;
// flops ~ 15 n (sqrt and divide counted as one each).
// grad_scale (nullable): a device scalar every gradient is multiplied by
// first, g = fl(grad * s), exactly what scaling the gradients in place
// beforehand would store: the clip coefficient of clip_coef_kernel, so that
// clipping needs no host round trip (and can be captured in a CUDA graph).
__global__ void adamw_multi_tensor_kernel(const gpu::AdamWTensor* __restrict__ tensors, int num_tensors,
                                          int64_t num_chunks, float beta1, float beta2, float eps,
                                          const float* __restrict__ grad_scale) {
  const float gs = grad_scale ? *grad_scale : 1.f;
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const gpu::AdamWTensor& d = tensors[tensor_of_chunk(tensors, num_tensors, c)];
    const int64_t begin = (c - d.chunk_begin) * gpu::kMultiTensorChunk;
    const int64_t end = begin + gpu::kMultiTensorChunk < d.n ? begin + gpu::kMultiTensorChunk : d.n;
    __nv_bfloat16* const p16 = static_cast<__nv_bfloat16*>(d.param_bf16);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float g = grad_scale ? d.grad[i] * gs : d.grad[i];
      const float m = beta1 * d.m[i] + (1.f - beta1) * g;
      const float v = beta2 * d.v[i] + (1.f - beta2) * g * g;
      const float p = d.param[i] * d.decay - d.step_size * m / (sqrtf(v) / d.sqrt_bc2 + eps);
      d.m[i] = m;
      d.v[i] = v;
      d.param[i] = p;
      if (p16) p16[i] = from_f32<__nv_bfloat16>(p);
    }
  }
}

// Pass 1: block b writes the fp32 sum of squares of its chunks to partials[b].
// Launch: exactly `grid` <= 1024 blocks of 256 threads, grid-stride over chunks.
// bytes = n sizeof(T) + 4 grid; flops = 2 n.
__global__ void sum_squares_partials_kernel(const gpu::SumSquaresTensor* __restrict__ tensors, int num_tensors,
                                            int64_t num_chunks, float* __restrict__ partials) {
  float s = 0.f;
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const gpu::SumSquaresTensor& d = tensors[tensor_of_chunk(tensors, num_tensors, c)];
    const int64_t begin = (c - d.chunk_begin) * gpu::kMultiTensorChunk;
    const int64_t end = begin + gpu::kMultiTensorChunk < d.n ? begin + gpu::kMultiTensorChunk : d.n;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float x = load_as_f32(d.x, d.st, i);
      s += x * x;
    }
  }
  s = gpu::block_sum<kThreads>(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// Pass 2: one block adds the `count` partials in a fixed order into *out,
// so the result does not depend on which block finished first (no atomics).
// Launch: 1 block of 256 threads. bytes = 4 count + 4; flops = count.
__global__ void sum_partials_kernel(const float* __restrict__ partials, int count, float* __restrict__ out) {
  float s = 0.f;
  for (int i = int(threadIdx.x); i < count; i += blockDim.x) s += partials[i];
  s = gpu::block_sum<kThreads>(s);
  if (threadIdx.x == 0) *out = s;
}

// From the sum of squares of every gradient to the clip coefficient,
// torch.nn.utils.clip_grad_norm_'s formula in double as the host computes it:
//   norm = sqrt(ss);  coef = max_norm / (norm + 1e-6), used only when < 1.
// out[0] = norm (for logging), out[1] = the factor AdamW applies (1 when
// max_norm <= 0 or the norm is within bounds). A non-finite ss gives a
// non-finite norm, which the caller checks after the step.
// Launch: 1 thread. bytes = 12, flops ~ 4.
__global__ void clip_coef_kernel(const float* __restrict__ sum_squares, double max_norm, float* __restrict__ out) {
  const double norm = sqrt(double(*sum_squares));
  const double coef = max_norm / (norm + 1e-6);
  out[0] = float(norm);
  out[1] = max_norm > 0 && coef < 1.0 ? float(coef) : 1.f;
}

void adamw_multi_tensor(const gpu::AdamWTensor* d_tensors, int num_tensors, int64_t num_chunks, float beta1,
                        float beta2, float eps, const float* grad_scale, void* stream) {
  if (num_tensors == 0 || num_chunks == 0) return;
  LAUNCH_KERNEL(adamw_multi_tensor_kernel, grid_for(num_chunks, 1), kThreads, 0, as_stream(stream), d_tensors,
                num_tensors, num_chunks, beta1, beta2, eps, grad_scale);
}

void clip_coefficient(const float* d_sum_squares, double max_norm, float* d_out, void* stream) {
  LAUNCH_KERNEL(clip_coef_kernel, 1, 1, 0, as_stream(stream), d_sum_squares, max_norm, d_out);
}

void sum_squares_multi_tensor(const gpu::SumSquaresTensor* d_tensors, int num_tensors, int64_t num_chunks,
                              float* d_scratch, void* stream) {
  static_assert(gpu::kSumSquaresScratch - 1 >= kMaxGrid, "one partial per block");
  const unsigned grid = grid_for(num_chunks, 1);
  if (num_tensors == 0 || num_chunks == 0) {
    LAUNCH_KERNEL(sum_partials_kernel, 1, kThreads, 0, as_stream(stream), d_scratch + 1, 0, d_scratch);
    return;
  }
  LAUNCH_KERNEL(sum_squares_partials_kernel, grid, kThreads, 0, as_stream(stream), d_tensors, num_tensors, num_chunks,
                d_scratch + 1);
  LAUNCH_KERNEL(sum_partials_kernel, 1, kThreads, 0, as_stream(stream), d_scratch + 1, int(grid), d_scratch);
}

}  // namespace eng::ENGINE_GPU_NS
