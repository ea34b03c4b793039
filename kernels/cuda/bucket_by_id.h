// Launcher of kernels/cuda/bucket_by_id.cu: token positions bucketed by id on
// the GPU, for the embedding's deterministic backward (embedding.h). For n
// ids and a table of rows [start, start + V), it writes
//   d_row_start (V + 1): the positions of row v are
//   d_order[d_row_start[v] .. d_row_start[v + 1]), in increasing order;
// ids outside the table are in no bucket (d_row_start[V] counts the rest).
// A stable radix sort of the rows, 8 bits a pass, so the result is a pure
// function of the ids: the same bits on every run, and a captured step
// (engine/graph.h) redoes it on the device for every new batch, with no host
// node. Reference: cpu::bucket_by_id (kernels/cpu/embedding.cpp).
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// Positions a tile of the sort (a block, a thread each) and values a digit
// takes: equal, so thread d of a block counts digit d.
inline constexpr int64_t kBucketTile = 256;
inline constexpr int kBucketDigitBits = 8;
// Passes of 8 bits that sort rows 0..V (V itself marks an id outside the table).
inline int bucket_passes(int64_t V) {
  int bits = 1;
  while (bits < 62 && (int64_t(1) << bits) <= V) ++bits;
  return (bits + kBucketDigitBits - 1) / kBucketDigitBits;
}
inline int64_t bucket_tiles(int64_t n) { return (n + kBucketTile - 1) / kBucketTile; }
// int32s of workspace bucket_by_id needs: the rows twice (one pass reads, the
// next writes), the positions once more (the other of d_order's two
// buffers) and the digit counts of every tile.
inline int64_t bucket_workspace(int64_t n) { return 3 * n + kBucketTile * bucket_tiles(n); }
}  // namespace eng::gpu

#define ENGINE_BUCKET_LAUNCHERS                                                                                      \
  void bucket_by_id(const int32_t* ids, int64_t n, int64_t start, int64_t V, int32_t* d_order, int32_t* d_row_start, \
                    int32_t* workspace, void* stream);
ENGINE_GPU_DECLARE(ENGINE_BUCKET_LAUNCHERS)

// Costs (kernels/kernel_cost.h), P = bucket_passes(V), H = 256 tiles (the
// digit counts, about n). A pass: the count reads the rows and writes the
// counts (4 n + 4 H; the first pass reads the ids instead of rows), the
// scan reads and writes the counts (8 H), the scatter reads the rows, the
// positions (not on the first pass: they are i) and its tiles' offsets
// (4 n + 4 n + 4 H) and writes rows and positions (8 n): 20 n + 16 H, 4 n
// less on the first. Then the sorted rows are read by the starts' binary
// searches (4 n) and the starts written:
//   bytes = P (20 n + 16 H) + 4 (V + 1), flops = 0 (integer work);
// 3 P + 1 launches.
namespace eng::kcost {
inline kprof::Cost bucket_by_id(const int32_t*, int64_t n, int64_t, int64_t V, int32_t*, int32_t*, int32_t*, void*) {
  const double P = gpu::bucket_passes(V), H = double(gpu::kBucketTile * gpu::bucket_tiles(n));
  return kprof::memory(P * (20 * double(n) + 16 * H) + 4 * (double(V) + 1));
}
}  // namespace eng::kcost
