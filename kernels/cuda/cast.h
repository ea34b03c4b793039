// Launcher of kernels/cuda/cast.cu: dtype conversion between f32, bf16 and
// f16 on the device (Tensor::copy_from / Tensor::to(DType) for emu and cuda
// tensors). src and dst hold n contiguous elements and must not overlap.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_CAST_LAUNCHERS \
  void cast_storage(gpu::Storage src_st, const void* src, gpu::Storage dst_st, void* dst, int64_t n, void* stream);
ENGINE_GPU_DECLARE(ENGINE_CAST_LAUNCHERS)
