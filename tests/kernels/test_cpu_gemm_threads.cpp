// The cpu GEMM split over OpenMP threads (kernels/gemm/blas_gemm.cpp): C cut
// into a grid of tiles, one single-threaded OpenBLAS product per tile, or
// split along K for a weight gradient's shape. Checked against a triple loop
// in double at 1 to 4 threads, on shapes that make each kind of split: rows
// cut (M long), columns cut (N long), both (2 x 2 at 4 threads), ragged
// tiles, a last tile that the rounding to 16 leaves empty, and K split in
// 2, 3 and 4 ragged parts; every transpose pair, padded row strides (the
// padding must stay untouched), beta = 0 over a C full of NaN (never read)
// and beta = 2. Then the strided batch with a product per thread.
#include <omp.h>

#include <cmath>
#include <limits>

#include "kernels/gemm/gemm.h"
#include "kernels/rng.h"
#include "tests/test_util.h"

using namespace eng;

namespace {

std::vector<float> randv(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rng::normal(seed, i);
  return v;
}

// OpenMP's thread count for one scope.
struct Threads {
  int saved = omp_get_max_threads();
  explicit Threads(int n) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
};

struct GemmShape {
  int64_t M, N, K;
  const char* what;
};

// Sums of K products of N(0, 1) values: the f32 rounding grows like sqrt(K).
double tol_for(int64_t K) { return 8e-6 * std::sqrt(double(K)); }

// C = alpha op(A) op(B) + beta C through cpu::gemm at `threads`, against the
// same in double; returns C.
std::vector<float> check(const GemmShape& s, Trans ta, Trans tb, float beta, int threads) {
  const int64_t pad = 3;
  const int64_t arows = ta == Trans::N ? s.M : s.K, acols = ta == Trans::N ? s.K : s.M;
  const int64_t brows = tb == Trans::N ? s.K : s.N, bcols = tb == Trans::N ? s.N : s.K;
  const int64_t lda = acols + pad, ldb = bcols + pad, ldc = s.N + pad;
  const std::vector<float> A = randv(size_t(arows * lda), 1), B = randv(size_t(brows * ldb), 2);
  std::vector<float> C = randv(size_t(s.M * ldc), 3);
  if (beta == 0)  // beta = 0 never reads C: the tiles' NaN must not reach the result
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) C[size_t(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  std::vector<double> ref(C.begin(), C.end());
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.K; ++k)
        acc += double(ta == Trans::N ? A[size_t(i * lda + k)] : A[size_t(k * lda + i)]) *
               double(tb == Trans::N ? B[size_t(k * ldb + j)] : B[size_t(j * ldb + k)]);
      double& c = ref[size_t(i * ldc + j)];
      c = 0.5 * acc + (beta == 0 ? 0.0 : double(beta) * c);
    }
  {
    const Threads t(threads);
    cpu::gemm<float>(ta, tb, s.M, s.N, s.K, 0.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  }
  const double tol = tol_for(s.K);
  CHECK_CLOSE(std::vector<double>(C.begin(), C.end()), ref, tol, tol);
  return C;
}

}  // namespace

TEST_CASE("cpu gemm split over threads: every grid, transpose and beta against a triple loop", "[kernels]") {
  const GemmShape shapes[] = {
      {300, 40, 96, "rows cut (M the long side), ragged last tile"},
      {24, 290, 120, "columns cut (N the long side)"},
      {200, 200, 40, "2 x 2 grid at 4 threads"},
      {49, 40, 150, "at 3 threads: tiles of 32 rows, the third one empty (K split at 2)"},
      {40, 30, 20, "below the split's work threshold: one product"},
      {24, 40, 1000, "K split (K > 2 (threads - 1) max(M, N)), ragged parts"},
  };
  for (const GemmShape& s : shapes)
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (float beta : {0.f, 2.f}) {
          INFO(s.what << ": " << s.M << " x " << s.N << " x " << s.K << ", ta " << int(ta) << " tb " << int(tb)
                      << " beta " << beta);
          const std::vector<float> one = check(s, ta, tb, beta, 1);
          for (int threads : {2, 3, 4}) {
            INFO(threads << " threads");
            const std::vector<float> many = check(s, ta, tb, beta, threads);
            // The thread count moves a result by rounding at most.
            CHECK_CLOSE(std::vector<double>(many.begin(), many.end()), std::vector<double>(one.begin(), one.end()),
                        tol_for(s.K), tol_for(s.K));
          }
        }
}

TEST_CASE("cpu gemm_batched: a product per thread, shared B, against a triple loop", "[kernels]") {
  const int64_t M = 40, N = 36, K = 200, batch = 5;  // batch >= threads: one product per thread
  const std::vector<float> A = randv(size_t(batch * M * K), 4), B = randv(size_t(K * N), 5);
  std::vector<double> ref(size_t(batch * M * N));
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k)
          ref[size_t((p * M + i) * N + j)] += double(A[size_t((p * M + i) * K + k)]) * B[size_t(k * N + j)];
  for (int threads : {1, 2, 4}) {
    INFO(threads << " threads");
    std::vector<float> C(size_t(batch * M * N), std::numeric_limits<float>::quiet_NaN());
    {
      const Threads t(threads);
      cpu::gemm_batched<float>(Trans::N, Trans::N, M, N, K, 1.f, A.data(), K, M * K, B.data(), N, 0, 0.f, C.data(), N,
                               M * N, batch);
    }
    CHECK_CLOSE(std::vector<double>(C.begin(), C.end()), ref, 1e-4, 1e-4);
  }
}
