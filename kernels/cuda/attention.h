// Launchers of kernels/cuda/attention.cu: fused attention, causal or not,
// FlashAttention-2 style, forward and backward. q, out and their gradients
// are (B, Tq, NH, HS), k, v and theirs (B, Tk, NH, HS), in the storage
// dtype; lse and delta are fp32 (B, NH, Tq). Query i sits at position
// q_offset + i of the keys (self-attention: Tq = Tk, q_offset 0; context
// parallel: this rank's queries against every key). scale is 1/sqrt(HS).
// Outputs are written (=), never accumulated. HS <= 128
// (attention_max_head_size()). The backward takes the forward's mask.
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// causal: query i sees keys 0..q_offset+i; none: every key of the sequence.
enum class AttentionMask : uint8_t { none, causal };
struct AttentionDims {
  int64_t B = 0, Tq = 0, Tk = 0, NH = 0, HS = 0, q_offset = 0;
  // Rows (one per (b, t)) of q, k, v and of dq, dk, dv are ld_qkv elements
  // apart; 0: each its own tensor, q's rows NH * HS apart, k's and v's NKV
  // * HS. (NH + 2 NKV) HS: one packed (B, T, (NH + 2 NKV) HS) qkv read in
  // place, its gradient written in place. out, dout: NH * HS.
  int64_t ld_qkv = 0;
  // K/V heads (grouped-query attention; 0: NH). NH % NKV == 0; query head h
  // reads K/V head h / (NH / NKV); k, v, dk, dv are (B, Tk, NKV, HS).
  int64_t NKV = 0;
};
}  // namespace eng::gpu

#define ENGINE_ATTENTION_LAUNCHERS                                                                            \
  int64_t attention_max_head_size();                                                                          \
  void attention_forward(gpu::Storage st, const void* q, const void* k, const void* v, void* out, float* lse, \
                         const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream);                 \
  void attention_backward(gpu::Storage st, const void* dout, const void* q, const void* k, const void* v,     \
                          const void* out, const float* lse, float* delta, void* dq, void* dk, void* dv,      \
                          const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ATTENTION_LAUNCHERS)

// Costs (kernels/kernel_cost.h): each tensor once, in sizeof(T) (lse and
// delta fp32). Forward: read q, k, v, write out and lse. Backward: read
// dout, q, k, v, out, lse, write dq, dk, dv, and delta written, then read
// back. (The .cu's per-kernel bytes also count the K/V, Q and dO tiles
// re-read per tile pair, which caches absorb: the kernels' efficiency, not
// their bytes.) FLOPs as the FlashAttention papers count them: 4 HS per
// (query, key) pair forward (QK^T and PV), 2.5 x that backward (10 HS);
// pairs = B NH Tq Tk, or causal B NH Tq (q_offset + Tq / 2): half of T^2
// for self-attention.
namespace eng::kcost {
inline double attention_pairs(const gpu::AttentionDims& d, gpu::AttentionMask mask) {
  const double per_query = mask == gpu::AttentionMask::causal ? double(d.q_offset) + 0.5 * double(d.Tq) : double(d.Tk);
  return double(d.B) * double(d.NH) * double(d.Tq) * per_query;
}
// A pass that moves `io` (B, T, NH, HS) tensors of queries' rows and as
// many of keys' rows, `f32` fp32 values a query row, and does `per_pair` FLOPs
// per head dim and (query, key) pair.
inline kprof::Cost attention_cost(kprof::Kind kind, gpu::Storage st, const gpu::AttentionDims& d,
                                  gpu::AttentionMask mask, double io, double f32, double per_pair) {
  const double rows_q = double(d.B) * double(d.Tq) * double(d.NH),
               rows_k = double(d.B) * double(d.Tk) * double(d.NKV ? d.NKV : d.NH);
  kprof::Cost c;
  c.kind = kind;
  if (rows_q == 0) return c;  // nothing launched
  c.bytes = gpu::storage_bytes(st) * double(d.HS) * io * (rows_q + rows_k) + 4 * f32 * rows_q;
  c.flops = per_pair * double(d.HS) * attention_pairs(d, mask);
  return c;
}
inline kprof::Cost attention_forward(gpu::Storage st, const void*, const void*, const void*, void*, float*,
                                     const gpu::AttentionDims& d, gpu::AttentionMask mask, void*) {
  return attention_cost(kprof::Kind::attention_forward, st, d, mask, 2, 1, 4);
}
inline kprof::Cost attention_backward(gpu::Storage st, const void*, const void*, const void*, const void*, const void*,
                                      const float*, float*, void*, void*, void*, const gpu::AttentionDims& d,
                                      gpu::AttentionMask mask, void*) {
  return attention_cost(kprof::Kind::attention_backward, st, d, mask, 4, 3, 10);
}
}  // namespace eng::kcost
