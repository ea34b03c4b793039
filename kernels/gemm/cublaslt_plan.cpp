// plan_cublaslt: the row-major GemmCall -> column-major cuBLASLt mapping
// (the "row-major trick" of kernels/gemm/cublaslt.h), and the compute-mode
// rules. Pure functions, compiled in every build so the cpu tests can check
// them (tests/kernels/test_cublaslt_plan.cpp) where cuBLASLt cannot run.
#include <cstdint>
#include <limits>

#include "base/error.h"
#include "kernels/gemm/cublaslt.h"

namespace eng {

ComputeMode default_compute_mode(gpu::Storage st) {
  return st == gpu::Storage::bf16 ? ComputeMode::bf16 : st == gpu::Storage::f16 ? ComputeMode::fp16 : ComputeMode::fp32;
}

bool compute_mode_fits(gpu::Storage st, ComputeMode mode) {
  switch (mode) {
    case ComputeMode::fp32:
    case ComputeMode::tf32:
      return st == gpu::Storage::f32;
    case ComputeMode::bf16:
      return st == gpu::Storage::bf16;
    case ComputeMode::fp16:
      return st == gpu::Storage::f16;
  }
  return false;
}

namespace {
LtOp lt_op(Trans t) { return t == Trans::N ? LtOp::N : LtOp::T; }

// A row-major operand stored (rows x cols) with row stride ld is, read
// column-major, a (cols x rows) matrix with leading dimension ld.
LtLayout col_major_view(int64_t rows, int64_t cols, int64_t ld, int64_t stride) { return {cols, rows, ld, stride}; }
}  // namespace

LtPlan plan_cublaslt(const GemmCall& c) {
  ENGINE_CHECK(c.M >= 1 && c.N >= 1 && c.K >= 1 && c.batch >= 1, "cublaslt: empty GEMM (M ", c.M, ", N ", c.N, ", K ",
               c.K, ", batch ", c.batch, "); callers skip those");
  ENGINE_CHECK(c.batch <= std::numeric_limits<int32_t>::max(), "cublaslt: batch ", c.batch, " exceeds int32");
  // Stored shapes of the row-major operands (rows x cols, as in memory).
  const int64_t a_rows = c.ta == Trans::N ? c.M : c.K, a_cols = c.ta == Trans::N ? c.K : c.M;
  const int64_t b_rows = c.tb == Trans::N ? c.K : c.N, b_cols = c.tb == Trans::N ? c.N : c.K;
  ENGINE_CHECK(c.lda >= a_cols && c.ldb >= b_cols && c.ldc >= c.N,
               "cublaslt: a row stride is shorter than its row (lda ", c.lda, " < ", a_cols, ", ldb ", c.ldb, " < ",
               b_cols, " or ldc ", c.ldc, " < ", c.N, ")");

  // C^T (N x M) = op(B)^T (N x K) @ op(A)^T (K x M), column-major: B first.
  LtPlan p;
  p.m = c.N, p.n = c.M, p.k = c.K;
  p.transa = lt_op(c.tb), p.transb = lt_op(c.ta);
  p.a = col_major_view(b_rows, b_cols, c.ldb, c.stride_b);
  p.b = col_major_view(a_rows, a_cols, c.lda, c.stride_a);
  p.c = col_major_view(c.M, c.N, c.ldc, c.stride_c);
  p.batch = c.batch;
  p.first_is_b = true;
  p.bias_len = p.m;
  p.bias_grad_len = p.n;
  p.aux_ld = p.c.ld, p.aux_stride = p.c.stride;  // aux mirrors C (the hand-written GEMM's layout too)
  p.alpha = c.alpha, p.beta = c.beta;
  return p;
}

bool lt_aux_ok(const LtPlan& p) { return p.aux_ld % 8 == 0 && (p.batch == 1 || p.aux_stride % 8 == 0); }

}  // namespace eng
