// Launchers of kernels/cuda/rope.cu: the rotary position embedding in Hugging
// Face Llama's rotate_half layout (kernels/cpu/rope.cpp has the math). x and
// out are (B, T, rows ld apart); in each row the first `rot` heads of HS
// turn by their position's angles (positions pos_offset + t of table, fp32
// (P, HS): cos of pair i at [p][i], sin at [p][HS/2 + i]), the next `copy`
// heads are copied. direction +1: the forward; -1: the backward (the turn
// undone). out == x: in place (copy must be 0).
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
struct RopeDims {
  int64_t B = 0, T = 0, HS = 0, ld = 0, rot = 0, copy = 0, pos_offset = 0;
};
}  // namespace eng::gpu

#define ENGINE_ROPE_LAUNCHERS                                                                            \
  void rope_apply(gpu::Storage st, const void* x, void* out, const float* table, const gpu::RopeDims& d, \
                  int direction, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ROPE_LAUNCHERS)

// Costs (kernels/kernel_cost.h): each turned or copied element read and
// written once, the table's T rows read once (cached across b and heads):
// bytes = 2 B T (rot + copy) HS sizeof(T) + T HS 4; flops = 6 per pair, 3 B T rot HS.
namespace eng::kcost {
inline kprof::Cost rope_apply(gpu::Storage st, const void*, void*, const float*, const gpu::RopeDims& d, int, void*) {
  const double bt = double(d.B) * double(d.T);
  return kprof::memory(
      2 * bt * double(d.rot + d.copy) * double(d.HS) * gpu::storage_bytes(st) + 4 * double(d.T) * double(d.HS),
      3 * bt * double(d.rot) * double(d.HS));
}
}  // namespace eng::kcost
