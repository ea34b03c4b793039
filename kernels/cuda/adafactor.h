// Launcher of kernels/cuda/adafactor.cu: one Adafactor step over many
// tensors in seven launches, none of which reads back to the host (so it can
// be captured in a CUDA graph). The engine builds the descriptors on the
// host and copies them to the device each step (engine/optim/adafactor.cpp).
#pragma once
#include "kernels/cuda/adamw.h"  // kMultiTensorChunk
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {

// One parameter: fp32 weights seen as `batch` matrices of rows x cols (the
// last two dims; a vector is 1 x 1 x n and not factored).
struct AdafactorTensor {
  float* param;
  const float* grad;
  float* row;    // factored: batch x rows, else null
  float* col;    // factored: batch x cols
  float* v;      // not factored: n
  float* m;      // first moment, nullable (beta1 off)
  float* stats;  // scratch, batch + 2 floats: the row means, then lr and the clip divisor
  int64_t batch, rows, cols, n;
  int64_t chunk_begin;  // first element chunk (kMultiTensorChunk, adamw.h) of this tensor in the launch
  int64_t row_begin;    // first row item (factored tensors have batch x rows, the others none)
  int64_t tile_begin;   // first column tile (factored: adafactor_tiles)
  int64_t part_begin;   // first column-partial item (factored: adafactor_parts)
  float beta2t;         // 1 - t^decay_rate, t = this parameter's step count
  float rel_lr;         // the step size before parameter scaling
  float weight_decay;
  int32_t scale_parameter;  // lr x max(eps2, RMS(p)) when set
};

struct AdafactorConsts {
  float eps1, eps2, clip, beta1;
};

// The column statistics are summed in two passes: a column's sum over each
// slab of kAdafactorSlab rows (an item: one slab of one tile of
// kAdafactorTile columns of one matrix), then those partials in slab order.
// One pass over all the rows per tile left a 4096-column matrix 16 blocks.
inline constexpr int64_t kAdafactorTile = 256, kAdafactorSlab = 64;
inline int64_t adafactor_tiles(int64_t batch, int64_t cols) {
  return batch * ((cols + kAdafactorTile - 1) / kAdafactorTile);
}
inline int64_t adafactor_parts(int64_t batch, int64_t rows, int64_t cols) {
  return adafactor_tiles(batch, cols) * ((rows + kAdafactorSlab - 1) / kAdafactorSlab);
}
// Scratch floats: 2 per element chunk, then kAdafactorTile per partial item.
inline int64_t adafactor_scratch(int64_t num_chunks, int64_t num_parts) {
  return 2 * num_chunks + kAdafactorTile * num_parts;
}

}  // namespace eng::gpu

// partials: scratch of adafactor_scratch(num_chunks, num_parts) floats.
#define ENGINE_ADAFACTOR_LAUNCHERS                                                                            \
  void adafactor_multi_tensor(const gpu::AdafactorTensor* d_tensors, int num_tensors, int64_t num_chunks,     \
                              int64_t num_rows, int64_t num_tiles, int64_t num_parts, gpu::AdafactorConsts k, \
                              float* d_partials, const float* grad_scale, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ADAFACTOR_LAUNCHERS)

// Costs (kernels/kernel_cost.h): bytes per element: g read 4 times (rows,
// columns, partials, update), p read twice and written once: 28 n (+ 8 n for
// m with beta1), plus the row and column statistics read and written
// (8 (rows + cols)), the chunk partials (8 per chunk written, then read) and
// the column partials (8 x 256 per item written, then read: about n / 8);
// flops ~ 20 n. n is not known on the host (the descriptors live in device
// memory): num_chunks x kMultiTensorChunk, an upper bound (each tensor's
// last chunk is partial); rows + cols as num_rows + num_tiles x 256 (the
// column tile), also a bound. An unfactored tensor moves 32 n, not 28 n (g
// read twice, v read twice and written once): which tensors those are is in
// the descriptors, so their extra 4 n is not counted.
namespace eng::kcost {
inline kprof::Cost adafactor_multi_tensor(const gpu::AdafactorTensor*, int num_tensors, int64_t num_chunks,
                                          int64_t num_rows, int64_t num_tiles, int64_t num_parts,
                                          gpu::AdafactorConsts k, float*, const float*, void*) {
  if (num_tensors == 0 || num_chunks == 0) return {};
  const double n = double(num_chunks) * gpu::kMultiTensorChunk, tile = double(gpu::kAdafactorTile);
  const double stats =
      8 * (double(num_rows) + tile * double(num_tiles)) + 16 * double(num_chunks) + 8 * tile * double(num_parts);
  return kprof::memory((k.beta1 > 0 ? 36 : 28) * n + stats, 20 * n);
}
}  // namespace eng::kcost
