// Row-major GEMM on the host through OpenBLAS:
//   C(M, N) = alpha * op(A) @ op(B) + beta * C
// with op(A) (M, K), op(B) (K, N); lda/ldb/ldc are row strides of A, B, C as
// stored. beta = 1 accumulates, which weight gradients use. Threads: C is
// cut into tiles, one single-threaded OpenBLAS product per OpenMP thread
// (blas_gemm.cpp says why); inside an OpenMP region, one product.
// flops = 2*M*N*K; bytes >= 4*(M*K + K*N + 2*M*N) for fp32.
#pragma once
#include <cstdint>
#include <string>

namespace eng {

enum class Trans : uint8_t { N, T };

// One strided-batched row-major GEMM, the layout every executor shares (the
// OpenBLAS one below, the hand-written kernel in kernels/cuda/gemm.cu, and
// the cuBLASLt wrapper of issue 4): for i in [0, batch),
//   C_i = alpha * op(A_i) @ op(B_i) + beta * C_i,   X_i = X + i * stride_x,
// op(A_i) (M, K), op(B_i) (K, N), C_i (M, N); lda/ldb/ldc are the row strides
// of A, B, C as stored. stride_b = 0 shares one B across the batch. beta = 0
// never reads C (it may hold garbage); beta = 1 accumulates (weight grads).
// out_f32 (GPU executors, 16-bit A and B, A transposed and B not: a weight
// gradient's G^T X): C, and a bias gradient, are fp32 instead of A's storage,
// so mixed precision's fp32 weight gradients need no cast after the GEMM.
// Plain data, so it can be passed by value to a kernel.
struct GemmCall {
  Trans ta = Trans::N, tb = Trans::N;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  float alpha = 1.f, beta = 0.f;
  bool out_f32 = false;
};

// What a GPU executor (the hand-written GEMM, cuBLASLt) does with the product
// before storing it, in row-major terms, t = alpha op(A) op(B) + beta C:
//   none:          C = t
//   bias:          C = t + bias[n]
//   gelu_bias:     C = gelu_tanh(t + bias[n])
//   gelu_aux_bias: the same, and aux = t + bias[n] (the pre-activation GELU's
//                  backward needs), aux laid out as C (ldc, stride_c)
//   bgrad:         C = t, and bias[i] = sum_k op(A)[i, k] (cuBLASLt; ours for A transposed, one batch)
//   bias_residual: C = t + bias[n] + aux[m, n]: a residual block's output
//                  projection adding onto the residual stream, aux (read,
//                  laid out as C) the stream; beta must be 0 (cuBLASLt: the
//                  BIAS epilogue with aux as C, beta 1, into D)
//   dgelu:         C = gelu_tanh'(aux[m, n]) * t, aux (read, laid out as C)
//                  the pre-activation a GELU saved: the gradient through
//                  GELU of the GEMM that computes its output's gradient
//                  (cuBLASLt's DGELU)
//   residual:      C = t + aux[m, n]: bias_residual without a bias (a Llama
//                  block's projections have none); cuBLASLt: aux as C, beta
//                  1, into D, no epilogue
//   dgelu_bgrad:   dgelu, and bias[n] = sum_m C[m, n] (one batch): the
//                  gradient's column sums, the GELU's linear layer's bias
//                  gradient (cuBLASLt's DGELU_BGRAD, bias in C's type; the
//                  hand-written GEMMs take no such call: the engine runs
//                  their dgelu, then the bias_grad kernel over C)
// Shared by both executors so that they take the same arguments.
enum class Epilogue : uint8_t {
  none,
  bias,
  gelu_bias,
  gelu_aux_bias,
  bgrad,
  bias_residual,
  dgelu,
  residual,
  dgelu_bgrad
};

// What each epilogue is given, said once for every executor's checks and
// costs. A bias read and added to C's columns:
constexpr bool epilogue_adds_bias(Epilogue e) {
  return e == Epilogue::bias || e == Epilogue::gelu_bias || e == Epilogue::gelu_aux_bias ||
         e == Epilogue::bias_residual;
}
// A bias pointer at all (bgrad and dgelu_bgrad write their column sums through it).
constexpr bool epilogue_takes_bias(Epilogue e) {
  return epilogue_adds_bias(e) || e == Epilogue::bgrad || e == Epilogue::dgelu_bgrad;
}
// aux read as the residual stream, in place of beta C.
constexpr bool epilogue_adds_residual(Epilogue e) { return e == Epilogue::bias_residual || e == Epilogue::residual; }
// An aux matrix laid out as C: written (gelu_aux_bias) or read (the others).
constexpr bool epilogue_takes_aux(Epilogue e) {
  return e == Epilogue::gelu_aux_bias || e == Epilogue::dgelu || e == Epilogue::dgelu_bgrad ||
         epilogue_adds_residual(e);
}

namespace cpu {
template <typename T>
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc);

// A layer's forward product with its additions, on the same tiles as gemm:
//   C = (R + bias[n]) + op(A) op(B),   bias: N values, R: M x N (row stride
//   ldr) or null (then C = bias + op(A) op(B)).
// Each tile is the engine's AVX-512 kernel adding them as it stores C
// (sgemm_avx512.h), or, where that does not run, filled with R + bias and
// then a beta = 1 product: the same sums either way, C written once.
// bytes >= 4 (M K + K N + M N + N (+ M N for R)).
template <typename T>
void gemm_bias(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
               const T* bias, const T* R, int64_t ldr, T* C, int64_t ldc);

// Strided batch: `batch` GEMMs with A, B, C advanced by their strides each time.
template <typename T>
void gemm_batched(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                  int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
                  int64_t stride_c, int64_t batch);
// The cpu executor of a GemmCall.
template <typename T>
void gemm_call(const GemmCall& c, const T* A, const T* B, T* C) {
  gemm_batched<T>(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), A, c.lda, c.stride_a, B, c.ldb, c.stride_b, T(c.beta), C,
                  c.ldc, c.stride_c, c.batch);
}

// "OpenBLAS <core> kernels, N threads" and, when OpenBLAS's CPU detection fell
// back to its SSE3 (Prescott) kernels on a CPU with AVX2/AVX-512, a hint naming
// the OPENBLAS_CORETYPE that would use them (detection happens when the
// library loads, so only the environment can change it).
std::string blas_info();

// A small GEMM and a malloc on every OpenMP thread. OpenBLAS takes a buffer
// (128 MiB of address space in Debian's build) at a thread's first GEMM and
// glibc an arena (64 MiB) at its first malloc; taken now, before a memory
// check, the process's size counts them (under ulimit -v they are what
// runs out), and OpenBLAS, which retries a failed buffer allocation
// forever, never has to take one mid-run.
void warm_threads();
// Address space warm_threads() may take, per thread: the two above.
constexpr size_t kThreadReserveBytes = size_t(192) << 20;
}  // namespace cpu
}  // namespace eng
