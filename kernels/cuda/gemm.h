// Launchers of kernels/cuda/gemm.cu: the hand-written tiled GEMM (with bias
// and GELU epilogues) and the bias gradient. The GEMM takes the same
// GemmCall as the cpu executor and the same Epilogue as cuBLASLt
// (kernels/gemm/gemm.h), so engine/ops/matmul.cpp plans each product once and
// hands the plan to whichever device runs it.
//   tiled_gemm:    C_i = alpha op(A_i) op(B_i) + beta C_i, then the epilogue:
//                  none; bias (+ bias[n] on every row); gelu_bias (gelu of
//                  that); gelu_aux_bias (the same, and the pre-activation,
//                  rounded to st, into aux, laid out as C: ldc, stride_c).
//                  bgrad is cuBLASLt's alone. GELU is computed from the
//                  rounded pre-activation, so it equals gelu_forward applied
//                  after the GEMM bit for bit. fp32 accumulation,
//                  A/B/C/bias/aux all in storage st.
//   bias_backward: db[c] = sum_r dout[r, c] over a contiguous (rows, cols)
//                  dout, in a fixed order (deterministic, no atomics).
#pragma once
#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

#define ENGINE_GEMM_LAUNCHERS                                                                                     \
  void tiled_gemm(gpu::Storage st, const GemmCall& call, const void* A, const void* B, void* C, const void* bias, \
                  Epilogue epi, void* aux, void* stream);                                                         \
  void bias_backward(gpu::Storage st, const void* dout, void* db, int64_t rows, int64_t cols, void* stream);
ENGINE_GPU_DECLARE(ENGINE_GEMM_LAUNCHERS)
