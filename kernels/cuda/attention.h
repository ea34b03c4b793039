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
