// Launcher of kernels/cuda/gemm_mma.cu, the GEMM ladder's tensor-core rung:
// tiled_gemm's contract (kernels/cuda/gemm.h: GemmCall, batch, alpha, beta,
// every Epilogue, out_f32) for bf16 and f16 operands, the product on
// mma.sync with fp32 accumulation. gemm_mma_takes says whether a call's
// layout suits it (lda, ldb and batch strides multiples of 8 elements, A
// and B 16-byte aligned, at most 65535 row tiles of 64); gemm_mma refuses
// the rest in one line. The
// workbench runs it beside cuBLASLt (bench/kernels --filter matmul), and
// the engine's matmul runs every product it takes on it under
// set_gemm_impl(GemmImpl::mma) (train --gemm mma).
#pragma once
#include <cstdint>

#include "kernels/cuda/gemm.h"  // kcost::tiled_gemm
#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

#define ENGINE_GEMM_MMA_LAUNCHERS                                                                            \
  void gemm_mma(gpu::Storage st, const GemmCall& g, const void* A, const void* B, void* C, const void* bias, \
                Epilogue epi, void* aux, void* stream);
ENGINE_GPU_DECLARE(ENGINE_GEMM_MMA_LAUNCHERS)

namespace eng {
inline bool gemm_mma_takes(gpu::Storage st, const GemmCall& g, const void* A, const void* B) {
  const bool strides = g.batch <= 1 || (g.stride_a % 8 == 0 && g.stride_b % 8 == 0);
  const bool grid = (g.M + 63) / 64 <= 65535;  // row tiles of 64 in gridDim.y
  return st != gpu::Storage::f32 && g.lda % 8 == 0 && g.ldb % 8 == 0 && strides && grid && gpu::aligned_to(A, 16) &&
         gpu::aligned_to(B, 16);
}
}  // namespace eng

// Costs (kernels/kernel_cost.h): tiled_gemm's (each operand once, C, bias
// and aux once). The .cu has the traffic of its 64 x 64 tiles.
namespace eng::kcost {
inline kprof::Cost gemm_mma(gpu::Storage st, const GemmCall& g, const void* A, const void* B, void* C, const void* bias,
                            Epilogue epi, void* aux, void* stream) {
  return tiled_gemm(st, g, A, B, C, bias, epi, aux, stream);
}
}  // namespace eng::kcost
