// Launchers of kernels/cuda/attention_mma.cu and attention_mma_backward.cu:
// attention forward and backward on tensor cores (mma.sync, ldmatrix,
// cp.async), the attention ladder's tensor-core rung. attention_forward's and
// attention_backward's contracts (kernels/cuda/attention.h: layouts, ld_qkv,
// q_offset, lse, delta, mask) for bf16 and f16 storage, head sizes 64 and
// 128, q, k, v (and dout) 16-byte aligned with rows a multiple of 8 elements
// apart; anything else is refused in one line. The workbench runs it beside ours
// and cuDNN's (bench/kernels --filter attention --impl mma); the engine's
// attention op calls it for AttentionImpl::ours wherever the contract holds.
#pragma once
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_ATTENTION_MMA_LAUNCHERS                                                                            \
  void attention_forward_mma(gpu::Storage st, const void* q, const void* k, const void* v, void* out, float* lse, \
                             const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream);                 \
  void attention_backward_mma(gpu::Storage st, const void* dout, const void* q, const void* k, const void* v,     \
                              const void* out, const float* lse, float* delta, void* dq, void* dk, void* dv,      \
                              const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ATTENTION_MMA_LAUNCHERS)

// Costs (kernels/kernel_cost.h): attention_forward's and attention_backward's
// (each tensor once; 4 HS and 10 HS flops a visible pair).
namespace eng::kcost {
inline kprof::Cost attention_backward_mma(gpu::Storage st, const void*, const void*, const void*, const void*,
                                          const void*, const float*, float*, void*, void*, void*,
                                          const gpu::AttentionDims& d, gpu::AttentionMask mask, void*) {
  return attention_cost(kprof::Kind::attention_backward, st, d, mask, 4, 3, 10);
}
inline kprof::Cost attention_forward_mma(gpu::Storage st, const void*, const void*, const void*, void*, float*,
                                         const gpu::AttentionDims& d, gpu::AttentionMask mask, void*) {
  return attention_cost(kprof::Kind::attention_forward, st, d, mask, 2, 1, 4);
}
}  // namespace eng::kcost
