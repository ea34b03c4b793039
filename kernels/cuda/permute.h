// Launcher of kernels/cuda/permute.cu: out = x with its dimensions reordered,
// out shape (shape[dims[0]], ..., shape[dims[ndim-1]]), both contiguous.
// Used by permute (and so transpose) on emu and cuda, forward and backward.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_PERMUTE_LAUNCHERS                                                                                   \
  void permute_forward(gpu::Storage st, const void* x, void* out, const int64_t* shape, const int* dims, int ndim, \
                       void* stream);
ENGINE_GPU_DECLARE(ENGINE_PERMUTE_LAUNCHERS)

// Costs (kernels/kernel_cost.h): bytes = 2 n sizeof(T), n = the product of
// shape[0, ndim) (a host array); flops = 0.
namespace eng::kcost {
inline kprof::Cost permute_forward(gpu::Storage st, const void*, void*, const int64_t* shape, const int*, int ndim,
                                   void*) {
  double n = 1;
  for (int d = 0; d < ndim; ++d) n *= double(shape[d]);
  return kprof::memory(2 * n * gpu::storage_bytes(st));
}
}  // namespace eng::kcost
