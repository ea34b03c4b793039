// Launchers of the kernel ladders (kernels/cuda/ladder_*.cu): the naive and
// intermediate versions that docs/kernels/*.md walk through on the way to
// the shipped kernels, as real kernels. f32 only, no vector loads, no
// tuning: each rung is what its page's section says and nothing more. The
// workbench runs them beside ours (bench/kernels --impl naive,smem,ours),
// validated against the same cpu reference; tests/kernels/test_ladder_emu.cpp
// checks them at ragged shapes. The engine itself never calls them.
//   ladder_gemm_naive:  one thread per output of C = op(A) op(B) (GemmCall's
//                       layout and transposes; batch 1, alpha 1, beta 0)
//   ladder_gemm_smem:   the same, a 16 x 16 block of outputs per block, A
//                       and B staged through shared memory 16 k at a time
//   ladder_layernorm_forward_naive:  one thread per row, three sweeps
//   ladder_layernorm_forward_warp:   a warp per row, lanes striding it
//   ladder_layernorm_backward_naive: one thread per row for dx; dw, db by
//                       atomicAdd from every row (zeroed first; the order
//                       of the additions, and so the last bits, vary)
//   ladder_layernorm_backward_warp:  a warp per row for dx; the same atomics
//   ladder_softmax_forward_naive:    one thread per row: max, sum of exp,
//                       divide; x and y may be the same buffer
//   ladder_softmax_forward_warp:     a warp per row, three sweeps
//   ladder_softmax_forward_vec:      the warp rung with 16-byte loads (the
//                       warp rung where rows do not allow them)
//   ladder_attention_forward_naive:  three kernels through global memory:
//                       S = q k^T scale (masked: -inf) into scores (B, NH,
//                       Tq, Tk), the naive softmax over its rows in place
//                       (scores then holds P), out = P v
#pragma once
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemm.h"  // kcost::gemm_cost
#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

#define ENGINE_LADDER_LAUNCHERS                                                                                    \
  void ladder_gemm_naive(const GemmCall& g, const float* A, const float* B, float* C, void* stream);               \
  void ladder_gemm_smem(const GemmCall& g, const float* A, const float* B, float* C, void* stream);                \
  void ladder_layernorm_forward_naive(const float* x, const float* w, const float* b, float* out, float* mean,     \
                                      float* rstd, int64_t N, int64_t C, double eps, void* stream);                \
  void ladder_layernorm_backward_naive(const float* dout, const float* x, const float* w, const float* mean,       \
                                       const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C,   \
                                       void* stream);                                                              \
  void ladder_layernorm_forward_warp(const float* x, const float* w, const float* b, float* out, float* mean,      \
                                     float* rstd, int64_t N, int64_t C, double eps, void* stream);                 \
  void ladder_layernorm_backward_warp(const float* dout, const float* x, const float* w, const float* mean,        \
                                      const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C,    \
                                      void* stream);                                                               \
  void ladder_softmax_forward_naive(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream); \
  void ladder_softmax_forward_warp(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream);  \
  void ladder_softmax_forward_vec(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream);   \
  void ladder_attention_forward_naive(const float* q, const float* k, const float* v, float* out, float* scores,   \
                                      const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream);
ENGINE_GPU_DECLARE(ENGINE_LADDER_LAUNCHERS)

// Costs (kernels/kernel_cost.h), each tensor once (the .cu's bytes for the
// GEMMs and attention are what the rungs request, re-reads included: that
// they request more is their inefficiency, not their bytes). GEMMs: as
// tiled_gemm's (gemm.h), f32. layernorm forward: bytes = 8 N C + 8 C + 8 N,
// flops ~ 8 N C. layernorm backward: bytes = 12 N C + 8 N + 4 C (dout, x, w,
// mean, rstd read, dx written) + 8 C (dw, db zeroed) + 8 C (dw, db written
// once; the .cu adds the atomics' 8 N C read-modify-writes, mostly in L2),
// flops ~ 15 N C (as the shipped kernels). softmax: bytes = 8 rows C, flops ~ 5 rows C. attention:
// q, k, v read and out written, plus the scores (B NH Tq Tk floats) written,
// read and written by the softmax, and read by the PV product; FLOPs as
// attention_forward's (attention.h), though the rung computes the masked
// half of P V too.
namespace eng::kcost {
inline kprof::Cost ladder_gemm_naive(const GemmCall& g, const float*, const float*, float*, void*) {
  return gemm_cost(g, 4, 0);
}
inline kprof::Cost ladder_gemm_smem(const GemmCall& g, const float*, const float*, float*, void*) {
  return gemm_cost(g, 4, 0);
}
inline kprof::Cost ladder_layernorm_forward_naive(const float*, const float*, const float*, float*, float*, float*,
                                                  int64_t N, int64_t C, double, void*) {
  return kprof::memory(8 * double(N) * double(C) + 8 * double(C) + 8 * double(N), 8 * double(N) * double(C));
}
inline kprof::Cost ladder_layernorm_backward_naive(const float*, const float*, const float*, const float*, const float*,
                                                   float*, float*, float*, int64_t N, int64_t C, void*) {
  return kprof::memory(12 * double(N) * double(C) + 8 * double(N) + 20 * double(C), 15 * double(N) * double(C));
}
inline kprof::Cost ladder_softmax_forward_naive(const float*, float*, int64_t rows, int64_t C, bool, void*) {
  return kprof::memory(8 * double(rows) * double(C), 5 * double(rows) * double(C));
}
// The warp rungs move what the naive ones move: the same bytes, fewer sectors.
inline kprof::Cost ladder_layernorm_forward_warp(const float* x, const float* w, const float* b, float* out,
                                                 float* mean, float* rstd, int64_t N, int64_t C, double eps, void* s) {
  return ladder_layernorm_forward_naive(x, w, b, out, mean, rstd, N, C, eps, s);
}
inline kprof::Cost ladder_layernorm_backward_warp(const float* dout, const float* x, const float* w, const float* mean,
                                                  const float* rstd, float* dx, float* dw, float* db, int64_t N,
                                                  int64_t C, void* s) {
  return ladder_layernorm_backward_naive(dout, x, w, mean, rstd, dx, dw, db, N, C, s);
}
inline kprof::Cost ladder_softmax_forward_warp(const float* x, float* y, int64_t rows, int64_t C, bool c, void* s) {
  return ladder_softmax_forward_naive(x, y, rows, C, c, s);
}
inline kprof::Cost ladder_softmax_forward_vec(const float* x, float* y, int64_t rows, int64_t C, bool c, void* s) {
  return ladder_softmax_forward_naive(x, y, rows, C, c, s);
}
inline kprof::Cost ladder_attention_forward_naive(const float*, const float*, const float*, float*, float*,
                                                  const gpu::AttentionDims& d, gpu::AttentionMask mask, void*) {
  kprof::Cost c;
  c.kind = kprof::Kind::attention_forward;
  if (d.B == 0 || d.Tq == 0 || d.NH == 0 || d.HS == 0) return c;  // nothing launched
  const double rows_q = double(d.B) * double(d.Tq) * double(d.NH), rows_k = double(d.B) * double(d.Tk) * double(d.NH);
  c.bytes = 4 * double(d.HS) * (2 * rows_q + 2 * rows_k) + 4 * 4 * rows_q * double(d.Tk);
  c.flops = 4 * double(d.HS) * attention_pairs(d, mask);
  return c;
}
}  // namespace eng::kcost
