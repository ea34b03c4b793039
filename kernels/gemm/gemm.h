// Row-major GEMM on the host through OpenBLAS:
//   C(M, N) = alpha * op(A) @ op(B) + beta * C
// with op(A) (M, K), op(B) (K, N); lda/ldb/ldc are row strides of A, B, C as
// stored. beta = 1 accumulates, which weight gradients use.
// flops = 2*M*N*K; bytes >= 4*(M*K + K*N + 2*M*N) for fp32.
#pragma once
#include <cstdint>
#include <string>

namespace eng {

enum class Trans : uint8_t { N, T };

namespace cpu {
template <typename T>
void gemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc);

// Strided batch: `batch` GEMMs with A, B, C advanced by their strides each time.
template <typename T>
void gemm_batched(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                  int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
                  int64_t stride_c, int64_t batch);
// "OpenBLAS <core> kernels, N threads" and, when OpenBLAS's CPU detection fell
// back to its SSE3 (Prescott) kernels on a CPU with AVX2/AVX-512, a hint naming
// the OPENBLAS_CORETYPE that would use them (detection happens when the
// library loads, so only the environment can change it).
std::string blas_info();
}  // namespace cpu
}  // namespace eng
