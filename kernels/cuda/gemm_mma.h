// Launcher of kernels/cuda/gemm_mma.cu, the GEMM ladder's tensor-core rung:
// C = op(A) op(B) in bf16 or f16 storage, fp32 accumulation on mma.sync,
// GemmCall's row-major layout and transposes (batch 1, alpha 1, beta 0, C in
// the storage type). lda and ldb multiples of 8 elements, A and B 16-byte
// aligned. The workbench runs it beside cuBLASLt (bench/kernels --filter
// matmul); the engine's matmul does not call it.
#pragma once
#include "kernels/cuda/gemm.h"  // kcost::gemm_cost
#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

#define ENGINE_GEMM_MMA_LAUNCHERS \
  void gemm_mma(gpu::Storage st, const GemmCall& g, const void* A, const void* B, void* C, void* stream);
ENGINE_GPU_DECLARE(ENGINE_GEMM_MMA_LAUNCHERS)

// Costs (kernels/kernel_cost.h): a GEMM of 2 M N K flops; bytes as every
// GEMM counts them (gemm_cost: each operand once, C once). The .cu has the
// traffic of its 64 x 64 tiles.
namespace eng::kcost {
inline kprof::Cost gemm_mma(gpu::Storage st, const GemmCall& g, const void*, const void*, void*, void*) {
  return gemm_cost(g, int(gpu::storage_bytes(st)), 0);
}
}  // namespace eng::kcost
