// Launcher of kernels/cuda/permute.cu: out = x with its dimensions reordered,
// out shape (shape[dims[0]], ..., shape[dims[ndim-1]]), both contiguous.
// Used by permute (and so transpose) on emu and cuda, forward and backward.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_PERMUTE_LAUNCHERS                                                                                   \
  void permute_forward(gpu::Storage st, const void* x, void* out, const int64_t* shape, const int* dims, int ndim, \
                       void* stream);
ENGINE_GPU_DECLARE(ENGINE_PERMUTE_LAUNCHERS)
