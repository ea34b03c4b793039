// Launchers of kernels/cuda/cross_entropy.cu: the fused classifier (softmax
// cross-entropy over the vocabulary, loss and dlogits in one kernel) and the
// in-place rescale of a saved dlogits by the loss's incoming gradient, and
// the two scalars of the mean: 1/valid rows (counts = {1/valid, valid}) and
// the mean loss. Scales and scalars are device pointers (no host round trip).
// targets are int32 and losses fp32 whatever the storage dtype of the logits.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_CROSS_ENTROPY_LAUNCHERS                                                                                \
  void cross_entropy_fused(gpu::Storage st, const void* logits, const int32_t* targets, float* losses, void* dlogits, \
                           int64_t N, int64_t V, const float* dloss_scale, int32_t ignore_index, void* stream);       \
  void cross_entropy_scale_grad(gpu::Storage st, void* dlogits, const void* scale, int64_t n, void* stream);          \
  void cross_entropy_count_valid(const int32_t* targets, int64_t N, int32_t ignore_index, float* counts,              \
                                 void* stream);                                                                       \
  void cross_entropy_mean(gpu::Storage st, const float* losses, int64_t N, const float* counts, void* out,            \
                          void* stream);
ENGINE_GPU_DECLARE(ENGINE_CROSS_ENTROPY_LAUNCHERS)
