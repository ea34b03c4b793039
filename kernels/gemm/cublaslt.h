// The cuBLASLt executor of a GemmCall (kernels/gemm/gemm.h): every GEMM the
// cuda device runs. Plain C++ (no CUDA types), so engine code and the cpu
// tests include it in every build.
//
// Two halves:
//  - plan_cublaslt (cublaslt_plan.cpp, compiled in every build): the pure
//    layout decision. It maps a row-major GemmCall to the column-major
//    arguments cuBLASLt takes, and is tested on the cpu by executing the
//    plan with a column-major reference GEMM (tests/kernels/
//    test_cublaslt_plan.cpp), since no GPU is available in CI.
//  - CublasLtContext and gemm (cublaslt.cpp, CUDA builds only): the handle,
//    the workspace, the heuristic cache, and the one cublasLtMatmul call
//    site, which copies the plan's fields into descriptors and does nothing
//    else with the layout.
//
// The row-major trick. cuBLASLt is column-major. A row-major (r x c) matrix
// with row stride ld has the same bytes as a column-major (c x r) matrix
// with leading dimension ld, i.e. its transpose. So the row-major product
//   C = op(A) op(B)            (M x N)
// is, read column-major, C^T = op(B)^T op(A)^T (N x M), and cuBLASLt computes
// it with A and B swapped: its first operand is our B (with our tb as its
// transa), its second our A (with our ta as its transb), m = N, n = M, k = K,
// and the leading dimensions are our row strides unchanged. No data moves.
//
// Epilogues, in row-major terms (the plan converts them):
//   bias:      C[m, n] += bias[n] (length N), on every batch (bias stride 0).
//              Column-major: bias per row of D (length m' = N), cuBLASLt's
//              BIAS epilogue as is.
//   gelu_bias: C = gelu_tanh(op(A) op(B) + bias) (cuBLASLt's GELU is the tanh
//              approximation, as GPT-2's).
//   gelu_aux_bias: the same, plus aux = op(A) op(B) + bias, laid out as C
//              (row stride ldc, batch stride stride_c). Column-major, aux is
//              a second D: GELU_AUX_BIAS with EPILOGUE_AUX_LD = C's ld and
//              AUX_BATCH_STRIDE = C's stride; cuBLASLt wants both divisible
//              by 8 (lt_aux_ok), else the caller runs bias then GELU.
//              cuBLASLt applies GELU to the fp32 value before rounding aux,
//              so unlike the hand-written GEMM it is not bit-identical to
//              linear then gelu in bf16/f16.
//   bgrad:     out[i] = sum_k op(A)[i, k] (length M) written to `bias`, the
//              bias gradient when op(A) = G^T (dW = G^T X of a linear layer,
//              dbias = column sums of G). Column-major, our A is cuBLASLt's
//              B, and its per-column-of-D reduction over k is BGRADB.
//              Only for batch == 1 (batched bias gradients would all write
//              the same vector).
//   bias_residual: C = op(A) op(B) + aux + bias, aux the residual stream:
//              cuBLASLt's C with beta 1 (our beta must be 0) and D = our C,
//              the BIAS epilogue; one rounding, as the hand-written GEMM.
//   dgelu:     C = gelu_tanh'(aux) * op(A) op(B), aux the pre-activation
//              laid out as C: cuBLASLt's DGELU with EPILOGUE_AUX_LD (ld
//              divisible by 8, lt_aux_ok). cuBLASLt multiplies the fp32
//              product, the hand-written GEMM its rounded value.
//   residual:  bias_residual without the bias: aux as C, beta 1, the
//              DEFAULT epilogue (no bias pointer given).
// out_f32 (GemmCall): D, and a bias gradient, in fp32 of bf16/fp16 A and B
// (with no epilogue or bgrad only): the fp32 weight gradients.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

namespace eng {

// Epilogue (none, bias, gelu_bias, gelu_aux_bias, bgrad) comes from kernels/gemm/gemm.h.

// fp32: CUBLAS_COMPUTE_32F on f32 storage (bitwise fp32 products).
// tf32: CUBLAS_COMPUTE_32F_FAST_TF32 on f32 storage (inputs rounded to 10
//       mantissa bits inside the tensor cores, fp32 accumulation; precision O1).
// bf16 / fp16: bf16 / f16 storage for A, B, C and bias, fp32 accumulation
//       and fp32 alpha/beta (CUBLAS_COMPUTE_32F).
enum class ComputeMode : uint8_t { fp32, tf32, bf16, fp16 };

// The compute mode a storage type runs in by default (fp32 for f32), and the
// check that a mode fits a storage type (fp32/tf32 need f32 storage, bf16
// needs bf16, fp16 needs f16).
ComputeMode default_compute_mode(gpu::Storage st);
bool compute_mode_fits(gpu::Storage st, ComputeMode mode);

enum class LtOp : uint8_t { N, T };

// One column-major cuBLASLt matmul, D = alpha op(A') op(B') + beta C' with
// C' = D' in place (but for bias_residual and residual, whose C' is the residual). first = the pointer cuBLASLt takes
// as A' (always the GemmCall's B: `first_is_b` documents it), second = as B'. Each matrix layout is (rows, cols, ld) as
// stored, column-major, plus its batch stride (0 shares the operand; cuBLASLt accepts stride 0).
struct LtLayout {
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
};
struct LtPlan {
  int64_t m = 0, n = 0, k = 0;
  LtOp transa = LtOp::N, transb = LtOp::N;
  LtLayout a, b, c;  // a: the first pointer's layout, b: the second's, c: C and D
  int64_t batch = 1;
  bool first_is_b = true;              // cuBLASLt's A is the GemmCall's B (the row-major trick)
  int64_t bias_len = 0;                // bias / gelu_bias epilogue: m' = the GemmCall's N
  int64_t bias_grad_len = 0;           // bgrad epilogue (BGRADB): n' = the GemmCall's M
  int64_t aux_ld = 0, aux_stride = 0;  // gelu_aux_bias: the aux matrix, laid out as c
  float alpha = 1.f, beta = 0.f;
};

// The cuBLASLt arguments for a row-major GemmCall. Throws eng::Error for
// calls cuBLASLt would reject: sizes < 1 (the engine skips empty products
// before it gets here), a leading dimension smaller than the stored rows,
// batch beyond int32.
LtPlan plan_cublaslt(const GemmCall& call);

// Whether cuBLASLt accepts the plan's aux matrix for gelu_aux_bias: leading
// dimension and (for batch > 1) batch stride divisible by 8 elements.
bool lt_aux_ok(const LtPlan& p);

// A cuBLASLt handle, one workspace, and the heuristic's algorithm choices
// cached per (shape, layout, strides, dtype, compute mode, epilogue, beta,
// pointer alignment): the heuristic runs once per distinct key, later calls
// with that key reuse its descriptors and algorithm. One per cuda device
// (engine/gpu_context.h owns them); not thread-safe, like the stream it
// serves. Defined only in CUDA builds (cublaslt.cpp).
class CublasLtContext {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLAS's own default on Hopper
  explicit CublasLtContext(int device);
  ~CublasLtContext();
  CublasLtContext(const CublasLtContext&) = delete;
  CublasLtContext& operator=(const CublasLtContext&) = delete;
  int device() const;
  size_t cached_algorithms() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// C = alpha op(A) op(B) + beta C (+ epilogue), row-major GemmCall semantics,
// on `stream` (a cudaStream_t; nullptr = the default stream). A, B, C, bias
// are device pointers in storage st (C in fp32 for call.out_f32); `bias` is
// read for bias/gelu_bias/gelu_aux_bias/bias_residual and written (length M)
// for bgrad, ignored for none, dgelu and residual; `aux`, laid out as C,
// receives the pre-activation (gelu_aux_bias) or is read (bias_residual and
// residual: the residual; dgelu: the pre-activation), nullptr for the other
// epilogues.
void gemm(CublasLtContext& ctx, const GemmCall& call, gpu::Storage st, const void* A, const void* B, void* C,
          const void* bias, Epilogue epi, void* aux, ComputeMode mode, void* stream);

}  // namespace eng
