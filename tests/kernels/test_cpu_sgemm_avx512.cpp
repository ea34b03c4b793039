// The engine's AVX-512 fp32 GEMM (kernels/gemm/sgemm_avx512.cpp) called
// directly, against a triple loop in double: every remainder of its 6-row
// and 64-column tiles (M 128..133, N 1..200 including 15/16/17 and 63/64/65),
// K from 1 to its limit of 1024 (B packed in more than one chunk there), NN
// and NT, alpha and beta, beta = 0 over a C of NaN (never read), padded row
// strides whose padding stays untouched, and the bias and residual added at
// the store. Then the cases it must refuse (and leave C alone), and
// cpu::gemm_bias through the thread split, with the kernel and without it
// (the fill-then-OpenBLAS path), in float and double. On a CPU without
// AVX-512 only the refusals and gemm_bias's fallback run.
#include <omp.h>

#include <cmath>
#include <limits>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/sgemm_avx512.h"
#include "kernels/rng.h"
#include "tests/test_util.h"

using namespace eng;

namespace {

template <typename T>
std::vector<T> randv(size_t n, uint64_t seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = T(rng::normal(seed, i));
  return v;
}

double tol_for(int64_t K) { return 8e-6 * std::sqrt(double(K)); }

struct Case {
  int64_t M, N, K;
  Trans tb;
  float alpha, beta;
  bool bias, residual;
};

// Operands with padded strides (pad 5), the kernel's result and the reference.
struct Run {
  std::vector<float> A, B, C, bias, R;
  std::vector<double> ref;
  int64_t lda, ldb, ldc, ldr;
};

Run make(const Case& c) {
  Run r;
  const int64_t pad = 5;
  r.lda = c.K + pad;
  r.ldb = (c.tb == Trans::N ? c.N : c.K) + pad;
  r.ldc = c.N + pad;
  r.ldr = c.N + 2;
  r.A = randv<float>(size_t(c.M * r.lda), 1);
  r.B = randv<float>(size_t((c.tb == Trans::N ? c.K : c.N) * r.ldb), 2);
  r.C = randv<float>(size_t(c.M * r.ldc), 3);
  r.bias = randv<float>(size_t(c.N), 4);
  r.R = randv<float>(size_t(c.M * r.ldr), 5);
  if (c.beta == 0)  // never read: NaN here must not reach the result
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) r.C[size_t(i * r.ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  r.ref.assign(r.C.begin(), r.C.end());  // the padding keeps its values
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < c.K; ++k)
        acc += double(r.A[size_t(i * r.lda + k)]) *
               double(c.tb == Trans::N ? r.B[size_t(k * r.ldb + j)] : r.B[size_t(j * r.ldb + k)]);
      double v = double(c.alpha) * acc + (c.beta == 0 ? 0.0 : double(c.beta) * r.C[size_t(i * r.ldc + j)]);
      if (c.bias) v += r.bias[size_t(j)];
      if (c.residual) v += r.R[size_t(i * r.ldr + j)];
      r.ref[size_t(i * r.ldc + j)] = v;
    }
  return r;
}

bool call(const Case& c, Run& r) {
  return cpu::sgemm_avx512(Trans::N, c.tb, c.M, c.N, c.K, c.alpha, r.A.data(), r.lda, r.B.data(), r.ldb, c.beta,
                           r.C.data(), r.ldc, c.bias ? r.bias.data() : nullptr, c.residual ? r.R.data() : nullptr,
                           r.ldr);
}

}  // namespace

TEST_CASE("cpu sgemm_avx512: every tile remainder, NN and NT, alpha/beta, bias and residual, against a triple loop",
          "[kernels]") {
  if (!cpu::sgemm_avx512_supported()) {
    WARN("this CPU has no AVX-512F: the engine's kernel does not run here (OpenBLAS does every product)");
    return;
  }
  std::vector<Case> cases;
  for (int64_t M : {128, 129, 130, 131, 132, 133})
    for (Trans tb : {Trans::N, Trans::T}) cases.push_back({M, 70, 33, tb, 1.f, 0.f, false, false});
  for (int64_t N : {1, 15, 16, 17, 31, 33, 48, 63, 64, 65, 127, 130, 200})
    for (Trans tb : {Trans::N, Trans::T}) cases.push_back({131, N, 40, tb, 1.f, 0.f, false, false});
  for (int64_t K : {1, 2, 7, 128, 513, 1024})  // 513, 1024: B in more than one packed chunk at N = 200
    for (Trans tb : {Trans::N, Trans::T}) cases.push_back({133, 200, K, tb, 1.f, 0.f, false, false});
  for (Trans tb : {Trans::N, Trans::T}) {
    cases.push_back({130, 77, 50, tb, 0.5f, 2.f, false, false});
    cases.push_back({130, 77, 50, tb, -1.5f, 1.f, false, false});
    cases.push_back({131, 77, 50, tb, 1.f, 0.f, true, false});
    cases.push_back({131, 77, 50, tb, 1.f, 0.f, false, true});
    cases.push_back({132, 77, 50, tb, 1.f, 0.f, true, true});
    cases.push_back({132, 77, 50, tb, 0.5f, 1.f, true, true});
  }
  for (const Case& c : cases) {
    INFO(c.M << " x " << c.N << " x " << c.K << (c.tb == Trans::T ? " NT" : " NN") << " alpha " << c.alpha << " beta "
             << c.beta << (c.bias ? " +bias" : "") << (c.residual ? " +residual" : ""));
    Run r = make(c);
    REQUIRE(call(c, r));
    const double tol = tol_for(c.K);
    CHECK_CLOSE(std::vector<double>(r.C.begin(), r.C.end()), r.ref, tol, tol);
  }
}

TEST_CASE("cpu sgemm_avx512: refuses what it does not do, and leaves C alone", "[kernels]") {
  const Case ok{128, 64, 32, Trans::N, 1.f, 0.f, false, false};
  auto refused = [](const Case& c, Trans ta = Trans::N) {
    Run r = make(c);
    const std::vector<float> before = r.C;
    const bool ran = cpu::sgemm_avx512(ta, c.tb, c.M, c.N, c.K, c.alpha, r.A.data(), r.lda, r.B.data(), r.ldb, c.beta,
                                       r.C.data(), r.ldc);
    const bool untouched = std::equal(before.begin(), before.end(), r.C.begin(),
                                      [](float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; });
    return !ran && untouched;
  };
  CHECK(refused(ok, Trans::T));                                                      // op(A) transposed: OpenBLAS's
  CHECK(refused({cpu::kSgemmMinM - 1, 64, 32, Trans::N, 1.f, 0.f, false, false}));   // too few rows
  CHECK(refused({128, 64, cpu::kSgemmMaxK + 1, Trans::N, 1.f, 0.f, false, false}));  // K too long
  CHECK(refused({128, 64, 0, Trans::N, 1.f, 0.f, false, false}));                    // K = 0
  const bool was = cpu::set_sgemm_avx512(false);
  CHECK(refused(ok));  // switched off
  cpu::set_sgemm_avx512(was);
  if (cpu::sgemm_avx512_supported()) CHECK_FALSE(refused(ok));
}

TEMPLATE_TEST_CASE("cpu gemm_bias: (R + bias) + x W^T through the thread split, with and without the engine's kernel",
                   "[kernels]", float, double) {
  const int64_t M = 300, N = 90, K = 70;  // 2 threads: two tiles of 160 and 140 rows, each the kernel's (float)
  const std::vector<TestType> x = randv<TestType>(size_t(M * K), 6), w = randv<TestType>(size_t(N * K), 7);
  const std::vector<TestType> b = randv<TestType>(size_t(N), 8), r = randv<TestType>(size_t(M * N), 9);
  for (bool residual : {false, true}) {
    std::vector<double> ref(size_t(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += double(x[size_t(i * K + k)]) * double(w[size_t(j * K + k)]);
        ref[size_t(i * N + j)] = acc + double(b[size_t(j)]) + (residual ? double(r[size_t(i * N + j)]) : 0.0);
      }
    for (bool engine : {true, false})
      for (int threads : {1, 2}) {
        INFO((residual ? "residual + bias" : "bias")
             << (engine ? ", the engine's kernel where it runs" : ", OpenBLAS") << ", " << threads << " threads");
        std::vector<TestType> C(size_t(M * N), std::numeric_limits<TestType>::quiet_NaN());
        const bool was = cpu::set_sgemm_avx512(engine);
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        cpu::gemm_bias<TestType>(Trans::N, Trans::T, M, N, K, x.data(), K, w.data(), K, b.data(),
                                 residual ? r.data() : nullptr, N, C.data(), N);
        omp_set_num_threads(saved);
        cpu::set_sgemm_avx512(was);
        CHECK_CLOSE(std::vector<double>(C.begin(), C.end()), ref, tol_for(K), tol_for(K));
      }
  }
}
