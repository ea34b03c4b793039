// Launcher of kernels/cuda/concat.cu: a strided 2-D copy, the one data move
// concat and split are made of (on emu and cuda; the cpu's is
// kernels/cpu/layout.cpp copy_rows): dst[r * dst_stride + c] =
// src[r * src_stride + c] for r < rows, c < cols. Strides in elements.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_CONCAT_LAUNCHERS                                                                                     \
  void copy_rows(gpu::Storage st, const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows, \
                 int64_t cols, void* stream);
ENGINE_GPU_DECLARE(ENGINE_CONCAT_LAUNCHERS)

// Costs (kernels/kernel_cost.h): bytes = 2 rows cols sizeof(T); flops = 0.
namespace eng::kcost {
inline kprof::Cost copy_rows(gpu::Storage st, const void*, int64_t, void*, int64_t, int64_t rows, int64_t cols, void*) {
  return kprof::memory(2 * double(rows) * double(cols) * gpu::storage_bytes(st));
}
}  // namespace eng::kcost
