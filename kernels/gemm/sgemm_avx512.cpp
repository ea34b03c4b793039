// The engine's AVX-512 fp32 GEMM for NN and NT products (sgemm_avx512.h says
// why and what). Only the functions marked kAvx512 use AVX-512 instructions,
// and they run only after the CPU said it has them: the rest of the build
// stays at the baseline ISA.
#include "kernels/gemm/sgemm_avx512.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ENGINE_SGEMM_AVX512 1
#endif

namespace eng::cpu {

namespace {
std::atomic<bool>& enabled() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("ENGINE_CPU_GEMM");
    return !(e && std::strcmp(e, "openblas") == 0);
  }()};
  return on;
}
}  // namespace

bool set_sgemm_avx512(bool on) { return enabled().exchange(on); }

#if defined(ENGINE_SGEMM_AVX512)

bool sgemm_avx512_supported() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}

namespace {
#define kAvx512 __attribute__((target("avx512f")))

constexpr int kMR = 6;   // rows of C per micro-tile
constexpr int kNR = 64;  // columns of C per micro-tile: 4 vectors of 16
// Packed B is cut into chunks of at most this many floats (512 KiB, half of
// a 1 MiB L2): a chunk's panels are read once per 6 rows of A.
constexpr int64_t kChunkFloats = int64_t(1) << 17;

// The store's additions (sgemm_avx512.h): bias[n] and R[m, n], each optional;
// bias and R point at this tile's first column and row.
struct Epi {
  const float* bias;
  const float* R;
  int64_t ldr;
};

// C[0..R, 0..16 V) (only `last` lanes of vector V - 1) = alpha * A Bp + beta C
// (+ R + bias), A: R rows of K values (row stride lda), Bp: K x kNR packed,
// zero padded.
// The accumulators live in registers for all of K: 24 of the 32 zmm at
// R = 6, V = 4. C's lines are prefetched first: for beta != 0 they are read
// at the end, and for beta = 0 a store to a line not in cache waits for it.
template <int R, int V>
kAvx512 void sgemm_tile(int64_t K, const float* A, int64_t lda, const float* Bp, float* C, int64_t ldc, float alpha,
                        float beta, int last, Epi e) {
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < V; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + 16 * j), _MM_HINT_T0);
      if (e.R) _mm_prefetch(reinterpret_cast<const char*>(e.R + i * e.ldr + 16 * j), _MM_HINT_T0);
    }
  __m512 acc[R][V];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < V; ++j) acc[i][j] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[V];
    for (int j = 0; j < V; ++j) b[j] = _mm512_load_ps(Bp + k * kNR + 16 * j);
    for (int i = 0; i < R; ++i) {
      const __m512 a = _mm512_set1_ps(A[i * lda + k]);
      for (int j = 0; j < V; ++j) acc[i][j] = _mm512_fmadd_ps(a, b[j], acc[i][j]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 tail = __mmask16((1u << last) - 1u);
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < V; ++j) {
      const __mmask16 m = j == V - 1 ? tail : __mmask16(0xffff);
      float* c = C + i * ldc + 16 * j;
      __m512 v = _mm512_mul_ps(va, acc[i][j]);
      if (beta != 0.f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, c), v);  // beta = 0 never reads C
      if (e.R || e.bias) {  // (R + bias) + product: the sum OpenBLAS's path fills C with, then the product
        const __m512 r = e.R ? _mm512_maskz_loadu_ps(m, e.R + i * e.ldr + 16 * j) : _mm512_setzero_ps();
        const __m512 b = e.bias ? _mm512_maskz_loadu_ps(m, e.bias + 16 * j) : _mm512_setzero_ps();
        v = _mm512_add_ps(e.R && e.bias ? _mm512_add_ps(r, b) : e.R ? r : b, v);
      }
      _mm512_mask_storeu_ps(c, m, v);
    }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, float, float, int, Epi);
template <int R>
constexpr TileFn kRow[4] = {sgemm_tile<R, 1>, sgemm_tile<R, 2>, sgemm_tile<R, 3>, sgemm_tile<R, 4>};
constexpr const TileFn* kTiles[kMR] = {kRow<1>, kRow<2>, kRow<3>, kRow<4>, kRow<5>, kRow<6>};

// Columns n0..n0+nc of op(B) into panels of K x kNR (the last one zero
// padded), k-major: a panel's row k is the 64 values one step of the tile uses.
void pack_b(Trans tb, int64_t K, int64_t n0, int64_t nc, const float* B, int64_t ldb, float* dst) {
  for (int64_t p0 = 0; p0 < nc; p0 += kNR) {
    const int64_t nn = std::min<int64_t>(kNR, nc - p0);
    float* d = dst + p0 * K;
    if (tb == Trans::N) {
      for (int64_t k = 0; k < K; ++k) {
        std::memcpy(d + k * kNR, B + k * ldb + n0 + p0, size_t(nn) * sizeof(float));
        std::fill(d + k * kNR + nn, d + (k + 1) * kNR, 0.f);
      }
    } else {  // B is N x K: column j of op(B) is row j of B, read along its length
      for (int64_t j = 0; j < kNR; ++j) {
        if (j < nn) {
          const float* s = B + (n0 + p0 + j) * ldb;
          for (int64_t k = 0; k < K; ++k) d[k * kNR + j] = s[k];
        } else {
          for (int64_t k = 0; k < K; ++k) d[k * kNR + j] = 0.f;
        }
      }
    }
  }
}

void sgemm_run(Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
               int64_t ldb, float beta, float* C, int64_t ldc, const Epi& e) {
  // Columns per chunk: as many whole panels as fit kChunkFloats, at least one.
  const int64_t chunk = std::max<int64_t>(1, kChunkFloats / (K * kNR)) * kNR;
  thread_local std::vector<float> buf;  // kept between calls: no page faults per product
  const size_t need = size_t(std::min(chunk, (N + kNR - 1) / kNR * kNR) * K) + 16;
  if (buf.size() < need) buf.resize(need);
  // 64-byte aligned: a panel row is one aligned 256-byte run (aligned loads).
  float* packed = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t(63));
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nc = std::min(chunk, N - n0);
    pack_b(tb, K, n0, nc, B, ldb, packed);
    for (int64_t m0 = 0; m0 < M; m0 += kMR) {
      const int r = int(std::min<int64_t>(kMR, M - m0));
      for (int64_t p0 = 0; p0 < nc; p0 += kNR) {
        const int nn = int(std::min<int64_t>(kNR, nc - p0));
        const int v = (nn + 15) / 16;
        const int64_t n = n0 + p0;
        const Epi te{e.bias ? e.bias + n : nullptr, e.R ? e.R + m0 * e.ldr + n : nullptr, e.ldr};
        kTiles[r - 1][v - 1](K, A + m0 * lda, lda, packed + p0 * K, C + m0 * ldc + n, ldc, alpha, beta,
                             nn - 16 * (v - 1), te);
      }
    }
  }
}

// bench/gemm_census.c, when LD_PRELOAD put it in the process, times every
// cblas_sgemm; the products that run here never call CBLAS, so they report
// themselves to it through this function of the census (absent otherwise).
using CensusFn = void (*)(int ta, int tb, int m, int n, int k, int beta0, double seconds);
CensusFn census() {
  static const CensusFn f = reinterpret_cast<CensusFn>(dlsym(RTLD_DEFAULT, "gemm_census_record"));
  return f;
}
}  // namespace

bool sgemm_avx512(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias, const float* R,
                  int64_t ldr) {
  if (ta != Trans::N || M < kSgemmMinM || K < 1 || K > kSgemmMaxK || !enabled().load(std::memory_order_relaxed) ||
      !sgemm_avx512_supported())
    return false;
  if (N <= 0) return true;
  const CensusFn record = census();
  const auto t0 = record ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  sgemm_run(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, Epi{bias, R, ldr});
  if (record) {
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    record(0, tb == Trans::T, int(M), int(N), int(K), beta == 0.f && !bias && !R, dt.count());
  }
  return true;
}

#else  // not x86-64: OpenBLAS does every product

bool sgemm_avx512_supported() { return false; }
bool sgemm_avx512(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                  float*, int64_t, const float*, const float*, int64_t) {
  return false;
}

#endif

}  // namespace eng::cpu
