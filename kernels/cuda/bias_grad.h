// Launcher of kernels/cuda/bias_grad.cu: a linear layer's bias gradient
// apart from its weight-gradient GEMM, db[c] = sum over rows r of g[r, c]
// for a contiguous (rows, cols) gradient g, written or added (fp32 into a
// master's gradient, a later micro-batch's) in fp32 or g's storage type.
// The GEMM's epilogue (cuBLASLt's BGRADB) computes the same while it streams
// g, but keeps the GEMM from the kernels it runs fastest without one
// (docs/kernels/gemm.md, "The bias gradient apart"); ENGINE_BIAS_GRAD=apart
// (engine/ops.h, set_bias_grad_mode) takes this kernel instead.
// Deterministic: each block sums one chunk of rows of a slab of columns in
// row order, its warps' sums added in warp order into a row of fp32 partial
// sums (no atomics), and partial_sums_reduce_kernel adds the chunks' rows in
// order. The chunks depend on rows alone, so the bits are the same on every
// GPU and on the emulator. Reference: cpu::bias_backward (kernels/cpu/elementwise.cpp).
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// Chunks of at most kBiasGradChunkRows rows up to kBiasGradMaxChunks of
// them, longer chunks past that: 65,536 rows (GPT-2 at B 64) make 256
// chunks of 256; 8,192 make 64 of 128; 300 make 3 of 100.
inline constexpr int64_t kBiasGradChunkRows = 128;
inline constexpr int64_t kBiasGradMaxChunks = 256;
inline int64_t bias_grad_chunks(int64_t rows) {
  const int64_t want = (rows + kBiasGradChunkRows - 1) / kBiasGradChunkRows;
  return want < 1 ? 1 : want > kBiasGradMaxChunks ? kBiasGradMaxChunks : want;
}
// Floats of scratch bias_grad needs: a row of cols partial sums a chunk.
inline int64_t bias_grad_scratch_floats(int64_t rows, int64_t cols) { return bias_grad_chunks(rows) * cols; }
}  // namespace eng::gpu

#define ENGINE_BIAS_GRAD_LAUNCHERS                                                                                  \
  void bias_grad(gpu::Storage st, const void* g, int64_t rows, int64_t cols, float* scratch, void* db, bool db_f32, \
                 bool add, void* stream);
ENGINE_GPU_DECLARE(ENGINE_BIAS_GRAD_LAUNCHERS)

// Costs (kernels/kernel_cost.h), K = bias_grad_chunks(rows): g read once,
// the partial sums written and read back, db written (read too when added):
//   bytes = rows cols sizeof(T) + 8 K cols + cols sizeof(db) (x2 with add),
//   flops = rows cols + K cols; 2 launches.
namespace eng::kcost {
inline kprof::Cost bias_grad(gpu::Storage st, const void*, int64_t rows, int64_t cols, float*, void*, bool db_f32,
                             bool add, void*) {
  const double r = double(rows), c = double(cols), k = double(gpu::bias_grad_chunks(rows));
  const double out = c * (db_f32 ? 4.0 : double(gpu::storage_bytes(st))) * (add ? 2.0 : 1.0);
  return kprof::memory(r * c * gpu::storage_bytes(st) + 8 * k * c + out, r * c + k * c);
}
}  // namespace eng::kcost
