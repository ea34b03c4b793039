// Launchers of kernels/cuda/adamw.cu: the fused multi-tensor AdamW step
// (every parameter in one launch) and the global gradient sum of squares
// (for clip_grad_norm), and the clip coefficient computed from it on the
// device (clip_coefficient: out = {norm, factor}; AdamW's grad_scale reads
// the factor). The multi-tensor launchers take a device array of per-tensor descriptors
// that the engine builds on the host and copies to the device once per call
// (engine/optim/adamw.cpp, engine/optim/clip.cpp).
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {

// Elements per chunk: the unit of work of one block-iteration. Tensors are cut
// into chunks; chunk c of the launch belongs to the tensor whose
// [chunk_begin, chunk_begin + ceil(n / kChunk)) holds c.
inline constexpr int64_t kMultiTensorChunk = 2048;

// One parameter of a fused AdamW step. fp32 master weights and moments; the
// per-parameter constants are computed on the host in double and rounded to
// fp32, exactly as kernels/cpu/optim.cpp does, so emu matches cpu bit for bit
// (cuda may contract to FMAs: a few ulps).
struct AdamWTensor {
  float* param;
  const float* grad;
  float* m;
  float* v;
  void* param_bf16;     // nullable: also write the updated weights here, rounded to bf16
  int64_t n;            // elements
  int64_t chunk_begin;  // first chunk of this tensor in the launch (prefix sum of chunk counts)
  float decay;          // 1 - lr * weight_decay, lr = base lr * the group's lr_scale
  float step_size;      // lr / (1 - beta1^t), t = this parameter's own step count
  float sqrt_bc2;       // sqrt(1 - beta2^t)
  float unused_ = 0.f;  // keeps the struct a multiple of 8 bytes on every compiler
};

// One tensor of a sum of squares, in its storage dtype.
struct SumSquaresTensor {
  const void* x;
  int64_t n;
  int64_t chunk_begin;
  Storage st;
};

// Scratch floats the sum of squares needs: the result, then one partial per block.
inline constexpr int64_t kSumSquaresScratch = 1 + 1024;

inline int64_t chunks_of(int64_t n) { return (n + kMultiTensorChunk - 1) / kMultiTensorChunk; }

}  // namespace eng::gpu

#define ENGINE_ADAMW_LAUNCHERS                                                                                 \
  void adamw_multi_tensor(const gpu::AdamWTensor* d_tensors, int num_tensors, int64_t num_chunks, float beta1, \
                          float beta2, float eps, const float* grad_scale, void* stream);                      \
  void sum_squares_multi_tensor(const gpu::SumSquaresTensor* d_tensors, int num_tensors, int64_t num_chunks,   \
                                float* d_scratch, void* stream);                                               \
  void clip_coefficient(const float* d_sum_squares, double max_norm, float* d_out, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ADAMW_LAUNCHERS)

// Costs (kernels/kernel_cost.h): AdamW bytes = 28 n (read p, g, m, v; write
// p, m, v; fp32), flops ~ 15 n (engine/optim/adamw.cpp adds the 2 bytes an
// element of the bf16 copies, whose pointers lie in the device's descriptors); sum of squares bytes = n sizeof(T) + 4
// grid (the partials) + 4 grid + 4 (the partials summed into the result), flops = 2 n + grid; clip coefficient bytes =
// 12, flops ~ 4. n is not known on the host (the descriptors live in device memory): num_chunks x kMultiTensorChunk, an
// upper bound (each tensor's last chunk is partial). Not counted, being in the descriptors too: AdamW's bf16 copy (+ 2
// n where a tensor has one); the sum of squares counts 4 bytes an element, also a bound (a tensor's storage may be
// 16-bit). grid: one block per chunk, at most the 1024 partials of the scratch (the CUDA grid cap).
namespace eng::kcost {
inline kprof::Cost adamw_multi_tensor(const gpu::AdamWTensor*, int num_tensors, int64_t num_chunks, float, float, float,
                                      const float*, void*) {
  if (num_tensors == 0 || num_chunks == 0) return {};
  const double n = double(num_chunks) * gpu::kMultiTensorChunk;
  return kprof::memory(28 * n, 15 * n);
}
inline kprof::Cost sum_squares_multi_tensor(const gpu::SumSquaresTensor*, int num_tensors, int64_t num_chunks, float*,
                                            void*) {
  const int64_t max_grid = gpu::kSumSquaresScratch - 1;
  const double grid = num_tensors == 0 ? 0 : double(num_chunks < max_grid ? num_chunks : max_grid);
  const double n = num_tensors == 0 ? 0 : double(num_chunks) * gpu::kMultiTensorChunk;
  return kprof::memory(4 * n + 8 * grid + 4, 2 * n + grid);
}
inline kprof::Cost clip_coefficient(const float*, double, float*, void*) { return kprof::memory(12, 4); }
}  // namespace eng::kcost
