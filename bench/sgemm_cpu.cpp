// The engine's AVX-512 fp32 GEMM (kernels/gemm/sgemm_avx512.cpp) against
// OpenBLAS's cblas_sgemm, one thread, on the products a CPU training step
// gives each thread: GPT-2 tiny's and the l6 shape's forward (NT, the bias
// added) and input gradient (NN, beta 0) tiles at 2 threads, 1024 rows
// each, and smaller ones near the kernel's lower limit of 128 rows. The
// forward rows time what a step does either way: OpenBLAS after the bias is
// copied into C (a beta = 1 product onto it; the copy in its time), the
// engine's kernel adding the bias as it stores C (beta 0). The operands rotate over
// sets larger than the L3 cache, so each call finds A and C out of cache as
// in a step. Rounds alternate the two; the best round of each is printed,
// with their ratio and the largest difference between the two results.
//   flops = 2 M N K; bytes (kernels/gemm/sgemm_avx512.h).
// Usage: sgemm_cpu [--rounds N] [--quick]   (quick: 2 rounds, fewer sets)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm/sgemm_avx512.h"
#include "kernels/rng.h"

using namespace eng;

namespace {
struct Shape {
  const char* what;
  Trans tb;
  int64_t M, N, K;
  bool bias;  // a forward product: C = bias + A op(B)
};

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true, rounds = 2;
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "sgemm_cpu: bad option %s (usage: sgemm_cpu [--rounds N] [--quick])\n", argv[i]);
      return 2;
    }
  }
  if (!cpu::sgemm_avx512_supported()) {
    std::printf("sgemm_cpu: this CPU has no AVX-512F: the engine's kernel does not run here, nothing to compare\n");
    return 0;
  }
  openblas_set_num_threads(1);
  const Shape shapes[] = {
      {"tiny qkv fwd", Trans::T, 1024, 384, 128, true},  {"tiny fc fwd", Trans::T, 1024, 512, 128, true},
      {"tiny proj fwd", Trans::T, 1024, 128, 512, true}, {"tiny fc dX", Trans::N, 1024, 128, 512, false},
      {"tiny proj dX", Trans::N, 1024, 512, 128, false}, {"l6 qkv fwd", Trans::T, 1024, 576, 192, true},
      {"l6 proj fwd", Trans::T, 1024, 192, 768, true},   {"l6 fc dX", Trans::N, 1024, 192, 768, false},
      {"small", Trans::N, 128, 128, 128, false},         {"small", Trans::T, 256, 256, 64, true},
  };
  std::printf("one thread, %s; GFLOP/s, best of %d alternating rounds\n", openblas_get_corename(), rounds);
  std::printf("%-14s %-4s %16s %9s %9s %7s %9s\n", "product", "op", "M x N x K", "OpenBLAS", "engine", "ratio",
              "max diff");
  for (const Shape& s : shapes) {
    const int64_t asz = s.M * s.K, csz = s.M * s.N;
    // Enough sets to pass 64 MiB of A and C (twice this machine's L3), at least 2.
    const int64_t sets = std::max<int64_t>(2, (quick ? 8 : 64) * (int64_t(1) << 20) / (4 * (asz + csz)));
    std::vector<float> A(size_t(asz * sets)), B(size_t(s.N * s.K)), C0(size_t(csz * sets)), C1(size_t(csz * sets));
    for (size_t i = 0; i < A.size(); ++i) A[i] = rng::normal(1, i);
    for (size_t i = 0; i < B.size(); ++i) B[i] = rng::normal(2, i);
    std::vector<float> bias(size_t(s.N));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = rng::normal(3, i);
    const int64_t ldb = s.tb == Trans::N ? s.N : s.K;
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < rounds; ++r)
      for (int which = 0; which < 2; ++which) {
        std::vector<float>& C = which ? C1 : C0;
        std::fill(C.begin(), C.end(), std::nanf(""));  // beta 0 never reads it
        const double t0 = seconds();
        for (int64_t p = 0; p < sets; ++p) {
          const float* a = A.data() + p * asz;
          float* c = C.data() + p * csz;
          if (which == 0) {
            if (s.bias)
              for (int64_t i = 0; i < s.M; ++i) std::copy(bias.begin(), bias.end(), c + i * s.N);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, s.tb == Trans::T ? CblasTrans : CblasNoTrans, int(s.M), int(s.N),
                        int(s.K), 1.f, a, int(s.K), B.data(), int(ldb), s.bias ? 1.f : 0.f, c, int(s.N));
          } else {
            cpu::sgemm_avx512(Trans::N, s.tb, s.M, s.N, s.K, 1.f, a, s.K, B.data(), ldb, 0.f, c, s.N,
                              s.bias ? bias.data() : nullptr);
          }
        }
        best[which] = std::min(best[which], (seconds() - t0) / double(sets));
      }
    double diff = 0;
    for (size_t i = 0; i < C0.size(); ++i) diff = std::max(diff, double(std::fabs(C0[i] - C1[i])));
    const double gf = 2.0 * double(s.M) * double(s.N) * double(s.K) / 1e9;
    const std::string dims = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
    std::printf("%-14s N%c%s %16s %9.1f %9.1f %6.2fx %9.1e\n", s.what, s.tb == Trans::T ? 'T' : 'N',
                s.bias ? "+b" : "  ", dims.c_str(), gf / best[0], gf / best[1], best[0] / best[1], diff);
  }
  return 0;
}
