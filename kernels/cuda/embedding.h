// Launchers of kernels/cuda/embedding.cu: the lookup and its deterministic
// backward. The backward takes the token positions bucketed by id (CSR form,
// built on the host by the engine op): positions of id v are
// d_order[d_row_start[v] .. d_row_start[v + 1]), in increasing order. The
// add_positions_forward: out[b, t, :] = x[b, t, :] + table[first + t, :], a
// learned position embedding added to the token embeddings (B, T, C), in
// x's storage st, out in out_st (the compute dtype: the autocast cast
// fused); its backward is the table's column sums over b (bias_backward).
// embedding_positions_forward: the two in one pass, out[i, :] = w[ids[i] -
// start, :] + pos[first + i % T, :] in out_st (GPT-2's token and position
// embeddings: no (n, C) fp32 tensor between them); embedding_backward then
// takes its 16-bit gradient into the fp32 table (dw_st f32), no cast first.
// The embedding table holds ids [start, start + V) (a vocabulary shard under tp); other ids
// give zero rows forward and sit in no bucket backward. With accumulate the
// backward adds into dw (a gradient the table already has) and touches only
// the rows some position names.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_EMBEDDING_LAUNCHERS                                                                                \
  void embedding_forward(gpu::Storage st, const void* w, const int32_t* ids, void* out, int64_t n, int64_t C,     \
                         int64_t start, int64_t V, void* stream);                                                 \
  void embedding_backward(gpu::Storage st, gpu::Storage dw_st, const void* dout, const int32_t* d_order,          \
                          const int32_t* d_row_start, void* dw, bool accumulate, int64_t n, int64_t V, int64_t C, \
                          void* stream);                                                                          \
  void add_positions_forward(gpu::Storage st, gpu::Storage out_st, const void* x, const void* table, void* out,   \
                             int64_t B, int64_t T, int64_t C, int64_t first, void* stream);                       \
  void embedding_positions_forward(gpu::Storage st, gpu::Storage out_st, const void* w, const int32_t* ids,       \
                                   const void* pos, void* out, int64_t n, int64_t T, int64_t C, int64_t start,    \
                                   int64_t V, int64_t first, void* stream);
ENGINE_GPU_DECLARE(ENGINE_EMBEDDING_LAUNCHERS)

// Costs (kernels/kernel_cost.h): forward: bytes = 2 n C sizeof(T) + 4 n,
// flops = 0. backward (n = d_row_start[V], the positions bucketed, passed for
// this; a vocabulary shard's caller passes every position: an upper bound):
// bytes = n C sizeof(st) (dout) + V C sizeof(dw_st) (every row of dw written;
// with accumulate, min(n, V) rows at most read and written: 2 min(n, V) C
// sizeof(dw_st)) + 4 (n + V + 1) (the order and row starts), flops = n C.
namespace eng::kcost {
inline kprof::Cost embedding_forward(gpu::Storage st, const void*, const int32_t*, void*, int64_t n, int64_t C, int64_t,
                                     int64_t, void*) {
  return kprof::memory(2 * double(n) * double(C) * gpu::storage_bytes(st) + 4 * double(n));
}
// add_positions_forward: bytes = B T C (sizeof(st) + sizeof(out_st)) + T C
// sizeof(st) (each position's row read once; the other b's from cache),
// flops = B T C.
inline kprof::Cost add_positions_forward(gpu::Storage st, gpu::Storage out_st, const void*, const void*, void*,
                                         int64_t B, int64_t T, int64_t C, int64_t, void*) {
  const double btc = double(B) * double(T) * double(C);
  return kprof::memory(
      btc * (gpu::storage_bytes(st) + gpu::storage_bytes(out_st)) + double(T) * double(C) * gpu::storage_bytes(st),
      btc);
}
inline kprof::Cost embedding_backward(gpu::Storage st, gpu::Storage dw_st, const void*, const int32_t*, const int32_t*,
                                      void*, bool accumulate, int64_t n, int64_t V, int64_t C, void*) {
  const double rows = accumulate ? 2.0 * double(n < V ? n : V) : double(V);
  return kprof::memory(double(n) * double(C) * gpu::storage_bytes(st) + rows * double(C) * gpu::storage_bytes(dw_st) +
                           4 * (double(n) + double(V) + 1),
                       double(n) * double(C));
}
// embedding_positions_forward: bytes = n C (sizeof(st) + sizeof(out_st)) + T C
// sizeof(st) (each position's row read once, the rest from cache) + 4 n,
// flops = n C.
inline kprof::Cost embedding_positions_forward(gpu::Storage st, gpu::Storage out_st, const void*, const int32_t*,
                                               const void*, void*, int64_t n, int64_t T, int64_t C, int64_t, int64_t,
                                               int64_t, void*) {
  const double nc = double(n) * double(C);
  return kprof::memory(nc * (gpu::storage_bytes(st) + gpu::storage_bytes(out_st)) +
                           double(T) * double(C) * gpu::storage_bytes(st) + 4 * double(n),
                       nc);
}
}  // namespace eng::kcost
