// Launchers of kernels/cuda/gemm.cu: the hand-written tiled GEMM (with an
// optional bias epilogue) and the bias gradient. The GEMM takes the same
// GemmCall as the cpu executor (kernels/gemm/gemm.h), so engine/ops/matmul.cpp
// plans each product once and hands the plan to whichever device runs it.
//   tiled_gemm:    C_i = alpha op(A_i) op(B_i) + beta C_i (+ bias[n] on every
//                  row when bias != nullptr), fp32 accumulation, A/B/C/bias
//                  all in storage st.
//   bias_backward: db[c] = sum_r dout[r, c] over a contiguous (rows, cols)
//                  dout, in a fixed order (deterministic, no atomics).
#pragma once
#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

#define ENGINE_GEMM_LAUNCHERS                                                                                     \
  void tiled_gemm(gpu::Storage st, const GemmCall& call, const void* A, const void* B, void* C, const void* bias, \
                  void* stream);                                                                                  \
  void bias_backward(gpu::Storage st, const void* dout, void* db, int64_t rows, int64_t cols, void* stream);
ENGINE_GPU_DECLARE(ENGINE_GEMM_LAUNCHERS)
