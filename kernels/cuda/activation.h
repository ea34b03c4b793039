// Launchers of kernels/cuda/activation.cu (GELU, tanh form).
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_ACTIVATION_LAUNCHERS                                                      \
  void gelu_forward(gpu::Storage st, const void* x, void* out, int64_t n, void* stream); \
  void gelu_backward(gpu::Storage st, const void* x, const void* dout, void* dx, int64_t n, void* stream);
ENGINE_GPU_DECLARE(ENGINE_ACTIVATION_LAUNCHERS)
