// Launchers of kernels/cuda/tensor_core_probe.cu: one tensor-core instruction
// each, on data the caller lays out lane by lane, for the tests that check the
// emulator's fragment layouts (and, on a GPU, the hardware's).
//   tc_probe_mma: kind 0 m16n8k16 bf16, 1 m16n8k16 f16, 2 m16n8k8 bf16,
//       3 m16n8k8 f16; a [32][4] and b [32][2] registers (k8 uses the first
//       2 and 1 of each lane's), c and d [32][4] fp32.
//   tc_probe_ldmatrix: ldmatrix.x{count}[.trans] on a tile of rows x 8
//       16-bit elements; lane l points at row row_of_lane[l]; out [32][count].
//   tc_probe_cp_async: n_chunks chunks of `bytes` through a double-buffered
//       cp.async pipeline (cg: cp.async.cg, 16 bytes), each copy reading
//       src_bytes and zero-filling the rest; out gets every chunk so copied.
#pragma once
#include "kernels/cuda/gpu_ops.h"

#define ENGINE_TENSOR_CORE_PROBE_LAUNCHERS                                                                   \
  void tc_probe_mma(int kind, const uint32_t* a, const uint32_t* b, const float* c, float* d, void* stream); \
  void tc_probe_ldmatrix(int count, bool trans, const uint16_t* tile, int rows, const int32_t* row_of_lane,  \
                         uint32_t* out, void* stream);                                                       \
  void tc_probe_cp_async(int bytes, bool cg, const void* src, int n_chunks, int src_bytes, void* out, void* stream);
ENGINE_GPU_DECLARE(ENGINE_TENSOR_CORE_PROBE_LAUNCHERS)

// Costs (kernels/kernel_cost.h): mma: bytes = 32 (16 + 8 + 16 + 16), flops =
// 2 16 8 K; ldmatrix: bytes = 16 rows + 128 + 128 count; cp_async: bytes =
// n_chunks (src_bytes + bytes).
namespace eng::kcost {
inline kprof::Cost tc_probe_mma(int kind, const uint32_t*, const uint32_t*, const float*, float*, void*) {
  return kprof::memory(32.0 * 56, 2.0 * 16 * 8 * (kind < 2 ? 16 : 8));
}
inline kprof::Cost tc_probe_ldmatrix(int count, bool, const uint16_t*, int rows, const int32_t*, uint32_t*, void*) {
  return kprof::memory(16.0 * rows + 128 + 128.0 * count);
}
inline kprof::Cost tc_probe_cp_async(int bytes, bool, const void*, int n_chunks, int src_bytes, void*, void*) {
  return kprof::memory(double(n_chunks) * (src_bytes + bytes));
}
}  // namespace eng::kcost
