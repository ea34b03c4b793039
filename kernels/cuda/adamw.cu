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
// a chunk, where the tensor's arrays are 16-byte aligned (every engine buffer
// is; a view may not be), thread i takes the 16-byte packs at elements
// 4i, 4i + 1024, ... of each array: a warp's load is 512 contiguous bytes,
// and a thread has four times the bytes in flight of one float at a time
// (which the H200's GPT-2 step measured at 65% of HBM for AdamW, 42% for the
// sum of squares: docs/kernels/adamw.md, "Bytes in flight"). A chunk's tail
// (n not a multiple of the pack) and unaligned views go element by element.
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

// One element's AdamW update, as kernels/cpu/optim.cpp's loop computes it.
__device__ __forceinline__ void adamw_element(float& p, float g, float& m, float& v, const gpu::AdamWTensor& d,
                                              float beta1, float beta2, float eps) {
  m = beta1 * m + (1.f - beta1) * g;
  v = beta2 * v + (1.f - beta2) * g * g;
  p = p * d.decay - d.step_size * m / (sqrtf(v) / d.sqrt_bc2 + eps);
}

struct alignas(8) Bf16x4 {
  __nv_bfloat16 v[4];
};

// The sum of x[i]^2 over the block's share of [begin, end): packs of 16
// bytes where x is aligned (begin is a multiple of the chunk, so x + begin
// is then too), then the tail element by element.
template <typename T>
__device__ __forceinline__ float sum_squares_range(const T* x, int64_t begin, int64_t end) {
  constexpr int P = Pack128<T>::size;
  float s = 0.f;
  int64_t rest = begin;
  if (aligned_to(x, 16)) {
    rest = begin + (end - begin) / P * P;
    for (int64_t i = begin + P * int64_t(threadIdx.x); i < rest; i += P * int64_t(blockDim.x)) {
      const Pack128<T> pk = load128(x + i);
      for (int k = 0; k < P; ++k) {
        const float f = to_f32(pk.v[k]);
        s += f * f;
      }
    }
  }
  for (int64_t i = rest + threadIdx.x; i < end; i += blockDim.x) {
    const float f = to_f32(x[i]);
    s += f * f;
  }
  return s;
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
    int64_t rest = begin;  // the first element left to the scalar loop
    if (aligned_to(d.param, 16) && aligned_to(d.grad, 16) && aligned_to(d.m, 16) && aligned_to(d.v, 16) &&
        (!p16 || aligned_to(p16, 8))) {
      rest = begin + (end - begin) / 4 * 4;
      for (int64_t i = begin + 4 * int64_t(threadIdx.x); i < rest; i += 4 * int64_t(blockDim.x)) {
        Pack128<float> p = load128(d.param + i), m = load128(d.m + i), v = load128(d.v + i);
        const Pack128<float> g = load128(d.grad + i);
        for (int k = 0; k < 4; ++k)
          adamw_element(p.v[k], grad_scale ? g.v[k] * gs : g.v[k], m.v[k], v.v[k], d, beta1, beta2, eps);
        store128(d.m + i, m);
        store128(d.v + i, v);
        store128(d.param + i, p);
        if (p16) {
          Bf16x4 b;
          for (int k = 0; k < 4; ++k) b.v[k] = from_f32<__nv_bfloat16>(p.v[k]);
          store_wide(p16 + i, b);
        }
      }
    }
    for (int64_t i = rest + threadIdx.x; i < end; i += blockDim.x) {
      float p = d.param[i], m = d.m[i], v = d.v[i];
      adamw_element(p, grad_scale ? d.grad[i] * gs : d.grad[i], m, v, d, beta1, beta2, eps);
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
    switch (d.st) {
      case gpu::Storage::bf16:
        s += sum_squares_range(static_cast<const __nv_bfloat16*>(d.x), begin, end);
        break;
      case gpu::Storage::f16:
        s += sum_squares_range(static_cast<const __half*>(d.x), begin, end);
        break;
      default:
        s += sum_squares_range(static_cast<const float*>(d.x), begin, end);
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
