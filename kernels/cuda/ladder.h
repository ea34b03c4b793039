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
//   ladder_layernorm_backward_naive: one thread per row for dx; dw, db by
//                       atomicAdd from every row (zeroed first; the order
//                       of the additions, and so the last bits, vary)
//   ladder_softmax_forward_naive:    one thread per row: max, sum of exp,
//                       divide; x and y may be the same buffer
//   ladder_attention_forward_naive:  three kernels through global memory:
//                       S = q k^T scale (masked: -inf) into scores (B, NH,
//                       Tq, Tk), the naive softmax over its rows in place
//                       (scores then holds P), out = P v
#pragma once
#include "kernels/cuda/attention.h"
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
  void ladder_softmax_forward_naive(const float* x, float* y, int64_t rows, int64_t C, bool causal, void* stream); \
  void ladder_attention_forward_naive(const float* q, const float* k, const float* v, float* out, float* scores,   \
                                      const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream);
ENGINE_GPU_DECLARE(ENGINE_LADDER_LAUNCHERS)
