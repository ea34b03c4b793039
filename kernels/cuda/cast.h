// Launcher of kernels/cuda/cast.cu: dtype conversion between f32, bf16 and
// f16 on the device (Tensor::copy_from / Tensor::to(DType) for emu and cuda
// tensors). src and dst hold n contiguous elements and must not overlap.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_CAST_LAUNCHERS \
  void cast_storage(gpu::Storage src_st, const void* src, gpu::Storage dst_st, void* dst, int64_t n, void* stream);
ENGINE_GPU_DECLARE(ENGINE_CAST_LAUNCHERS)

// Costs (kernels/kernel_cost.h): bytes = n (sizeof(src) + sizeof(dst)); flops = 0.
namespace eng::kcost {
inline kprof::Cost cast_storage(gpu::Storage src_st, const void*, gpu::Storage dst_st, void*, int64_t n, void*) {
  return kprof::memory(double(n) * (gpu::storage_bytes(src_st) + gpu::storage_bytes(dst_st)));
}
}  // namespace eng::kcost
