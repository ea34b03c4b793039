// Launchers of kernels/cuda/elementwise.cu: the elementwise arithmetic the
// engine's add/sub/mul/scale ops and the in-place helpers (add_, scale_,
// fill_) run on emu and cuda. All pointers hold n contiguous elements of the
// storage type; out may alias an input (scale_ is scale with x == out).
// bias_add_forward: out[r, c] = x[r, c] + bias[c] over contiguous (rows, cols)
// (add_bias, the row-parallel linear's bias after its all-reduce).
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_ELEMENTWISE_LAUNCHERS                                                                             \
  void add_forward(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream);           \
  void sub_forward(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream);           \
  void mul_forward(gpu::Storage st, const void* a, const void* b, void* out, int64_t n, void* stream);           \
  void scale_forward(gpu::Storage st, const void* x, float s, void* out, int64_t n, void* stream);               \
  void axpy_inplace(gpu::Storage st, void* dst, const void* src, float alpha, int64_t n, void* stream);          \
  void fill_inplace(gpu::Storage st, void* dst, float value, int64_t n, void* stream);                           \
  void bias_add_forward(gpu::Storage st, const void* x, const void* bias, void* out, int64_t rows, int64_t cols, \
                        void* stream);
ENGINE_GPU_DECLARE(ENGINE_ELEMENTWISE_LAUNCHERS)
