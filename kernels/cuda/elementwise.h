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

// Costs (kernels/kernel_cost.h): binary ops (add, sub, mul, axpy): bytes =
// 3 n sizeof(T), flops = n (axpy 2 n); scale: bytes = 2 n sizeof(T), flops =
// n; fill: bytes = n sizeof(T), flops = 0; bias_add: bytes = (2 rows cols +
// cols) sizeof(T), flops = rows cols.
namespace eng::kcost {
inline kprof::Cost add_forward(gpu::Storage st, const void*, const void*, void*, int64_t n, void*) {
  return kprof::memory(3 * double(n) * gpu::storage_bytes(st), double(n));
}
inline kprof::Cost sub_forward(gpu::Storage st, const void*, const void*, void*, int64_t n, void*) {
  return kprof::memory(3 * double(n) * gpu::storage_bytes(st), double(n));
}
inline kprof::Cost mul_forward(gpu::Storage st, const void*, const void*, void*, int64_t n, void*) {
  return kprof::memory(3 * double(n) * gpu::storage_bytes(st), double(n));
}
inline kprof::Cost scale_forward(gpu::Storage st, const void*, float, void*, int64_t n, void*) {
  return kprof::memory(2 * double(n) * gpu::storage_bytes(st), double(n));
}
inline kprof::Cost axpy_inplace(gpu::Storage st, void*, const void*, float, int64_t n, void*) {
  return kprof::memory(3 * double(n) * gpu::storage_bytes(st), 2 * double(n));
}
inline kprof::Cost fill_inplace(gpu::Storage st, void*, float, int64_t n, void*) {
  return kprof::memory(double(n) * gpu::storage_bytes(st));
}
inline kprof::Cost bias_add_forward(gpu::Storage st, const void*, const void*, void*, int64_t rows, int64_t cols,
                                    void*) {
  return kprof::memory((2 * double(rows) + 1) * double(cols) * gpu::storage_bytes(st), double(rows) * double(cols));
}
}  // namespace eng::kcost
