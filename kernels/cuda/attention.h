// Launchers of kernels/cuda/attention.cu: fused self-attention, causal or
// not, FlashAttention-2 style, forward and backward. q, k, v, out and their
// gradients are (B, T, NH, HS) in the storage dtype; lse and delta are fp32
// (B, NH, T). scale is 1/sqrt(HS). Outputs are written (=), never accumulated.
// HS <= 128 (attention_max_head_size()). The backward takes the forward's mask.
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// causal: query i sees keys 0..i; none: every key of the sequence.
enum class AttentionMask : uint8_t { none, causal };
}  // namespace eng::gpu

#define ENGINE_ATTENTION_LAUNCHERS                                                                                  \
  int64_t attention_max_head_size();                                                                                \
  void attention_forward(gpu::Storage st, const void* q, const void* k, const void* v, void* out, float* lse,       \
                         int64_t B, int64_t T, int64_t NH, int64_t HS, gpu::AttentionMask mask, void* stream);      \
  void attention_backward(gpu::Storage st, const void* dout, const void* q, const void* k, const void* v,           \
                          const void* out, const float* lse, float* delta, void* dq, void* dk, void* dv, int64_t B, \
                          int64_t T, int64_t NH, int64_t HS, gpu::AttentionMask mask, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ATTENTION_LAUNCHERS)
