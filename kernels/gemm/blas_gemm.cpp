// OpenBLAS wrapper behind kernels/gemm/gemm.h. CBLAS is asked for row-major
// directly, so the engine never has to think in column-major.
#include <cblas.h>

#include "kernels/gemm/gemm.h"

namespace eng::cpu {

static CBLAS_TRANSPOSE tr(Trans t) { return t == Trans::T ? CblasTrans : CblasNoTrans; }

template <>
void gemm<float>(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
              int(ldc));
}

template <>
void gemm<double>(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
              int(ldc));
}

template <typename T>
void gemm_batched(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                  int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
                  int64_t stride_c, int64_t batch) {
  for (int64_t i = 0; i < batch; ++i)
    gemm<T>(ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
}

template void gemm_batched<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                                  const float*, int64_t, int64_t, float, float*, int64_t, int64_t, int64_t);
template void gemm_batched<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*, int64_t, int64_t,
                                   const double*, int64_t, int64_t, double, double*, int64_t, int64_t, int64_t);

std::string blas_info() {
  const std::string core = openblas_get_corename();
  std::string s = "OpenBLAS " + core + " kernels, " + std::to_string(openblas_get_num_threads()) + " threads";
  __builtin_cpu_init();
  if (core == "Haswell" && __builtin_cpu_supports("avx512f"))  // an environment's preset, on an AVX-512 CPU
    s += " (this CPU has AVX-512: export OPENBLAS_CORETYPE=SkylakeX for faster GEMMs)";
  if (core == "Prescott") {
    const char* better = __builtin_cpu_supports("avx512f")                                 ? "SkylakeX"
                         : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "Haswell"
                                                                                           : nullptr;
    if (better)
      s += std::string(" (this CPU has ") + (better[0] == 'S' ? "AVX-512" : "AVX2") +
           ": export OPENBLAS_CORETYPE=" + better + " for faster GEMMs; scripts/train.sh does)";
  }
  return s;
}

}  // namespace eng::cpu
