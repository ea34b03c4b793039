// OpenBLAS wrapper behind kernels/gemm/gemm.h. CBLAS is asked for row-major
// directly, so the engine never has to think in column-major.
//
// Threads: the engine splits a product over its OpenMP threads itself, each
// piece one single-threaded OpenBLAS call: C is cut into a grid of tiles, one per
// thread, and each thread runs one single-threaded GEMM on its tile from
// start to end. Why not OpenBLAS's own threads: they share packed panels
// and wait on each other inside every call, and on a machine with
// neighbours (a VM, a shared node) one late thread stalls the other; timed
// on this project's 2-core VM, alternately, the training step's shapes
// (2048 x {128..512} x {128..512}, and the weight gradients' K = 2048) ran
// at 220-360 GFLOP/s under OpenBLAS's threads and 340-480 split here, and
// never slower. A second reason: a product called from inside an OpenMP
// region (attention's per-head GEMMs) must not start threads of its own
// (blas_single_threaded). The price: each tile packs
// its own copy of the operand it shares with the tiles beside it, so the
// grid is chosen to pack the least (grid_for). A product too small or too
// thin to cut (a 1 x 1 grid) is one call, which OpenBLAS's OpenMP build may
// still thread itself when it is made outside a parallel region.
// A grid leaves each element of C one single-threaded product over all of
// K; the weight gradients' shape is split along K instead (split_k), whose
// partial sums are added in a fixed order. Either way a run repeats bit for
// bit at the same thread count, and another count moves results by rounding.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/sgemm_avx512.h"

// OpenBLAS's pool of GEMM buffers (exported by every OpenBLAS build, not in
// cblas.h): a product takes one for its length and gives it back; a product
// finding none free allocates another, and retries that allocation forever
// if it fails.
extern "C" void* blas_memory_alloc(int procpos);
extern "C" void blas_memory_free(void* buffer);

namespace eng::cpu {

namespace {
CBLAS_TRANSPOSE tr(Trans t) { return t == Trans::T ? CblasTrans : CblasNoTrans; }

// A forward product's additions (gemm_bias): bias[n] and R[m, n], either
// null; an empty Epi adds nothing.
template <typename T>
struct Epi {
  const T* bias = nullptr;
  const T* R = nullptr;
  int64_t ldr = 0;
  bool any() const { return bias || R; }
  Epi at(int64_t m0, int64_t n0) const { return {bias ? bias + n0 : nullptr, R ? R + m0 * ldr + n0 : nullptr, ldr}; }
};

// C (M x N) = R + bias, the start of a product with additions that OpenBLAS
// runs (a beta = 1 product then adds to it).
template <typename T>
void fill_epi(int64_t M, int64_t N, const Epi<T>& e, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    const T* r = e.R ? e.R + i * e.ldr : nullptr;
    if (r && e.bias)
      for (int64_t j = 0; j < N; ++j) c[j] = r[j] + e.bias[j];
    else if (r)
      std::copy(r, r + N, c);
    else
      std::copy(e.bias, e.bias + N, c);
  }
}

// One product on this thread: C = alpha op(A) op(B) + beta C, plus e's
// additions when it has any (gemm_bias: then alpha = 1, beta = 0). fp32: the
// engine's AVX-512 kernel where it applies (NN, NT; sgemm_avx512.h), else
// OpenBLAS, onto C filled with the additions.
void blas(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc, const Epi<float>& e = {}) {
  if (sgemm_avx512(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e.bias, e.R, e.ldr)) return;
  if (e.any()) fill_epi(M, N, e, C, ldc), beta = 1.f;
  cblas_sgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
              int(ldc));
}
void blas(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc, const Epi<double>& e = {}) {
  if (e.any()) fill_epi(M, N, e, C, ldc), beta = 1.0;
  cblas_dgemm(CblasRowMajor, tr(ta), tr(tb), int(M), int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C,
              int(ldc));
}

// One thread per product inside an OpenMP region. OpenBLAS's OpenMP build
// (the one cmake/Dependencies.cmake links) does that by itself; its
// pthreads build would start its own threads there, so it is set to one
// thread, once. (Not the OpenMP build: its openblas_set_num_threads also
// sets OpenMP's thread count, every loop of the engine's included.)
void blas_single_threaded() {
  static const bool once = openblas_get_parallel() == 1 ? (openblas_set_num_threads(1), true) : true;
  (void)once;
}

// The threads a product may use: one inside an OpenMP region (its caller
// already runs on every thread), else OpenMP's count.
int64_t threads_here() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

// Below this M*N*K a product runs on one thread (OpenBLAS's own threshold
// for threading, 64^3): the fork would cost more than it saves.
constexpr double kSplitWork = 64.0 * 64 * 64;
// Tile edges are multiples of 16 (a cache line of floats, and a multiple of
// OpenBLAS's register blocks); the last tile of a row or column is what
// remains.
constexpr int64_t kTileAlign = 16;

int64_t tile_edge(int64_t n, int64_t parts) {
  const int64_t e = (n + parts - 1) / parts;
  return (e + kTileAlign - 1) / kTileAlign * kTileAlign;
}

// The grid of pm x pn tiles of C for up to nt threads: the most threads
// whose tiles are at least kTileAlign on a side, and among those the grid
// that packs the least, pn copies of op(A)'s M x K and pm of op(B)'s K x N
// (at 2 threads: the longer side of C is cut in two).
struct Grid {
  int64_t pm = 1, pn = 1;
};
Grid grid_for(int64_t M, int64_t N, int64_t nt) {
  Grid best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int64_t pm = 1; pm <= nt; ++pm)
    for (int64_t pn = 1; pm * pn <= nt; ++pn) {
      if (M < pm * kTileAlign || N < pn * kTileAlign) continue;
      const double cost = double(pn) * double(M) + double(pm) * double(N);
      if (pm * pn > best.pm * best.pn || (pm * pn == best.pm * best.pn && cost < best_cost))
        best = {pm, pn}, best_cost = cost;
    }
  return best;
}

// A product whose K is much longer than C's sides (a weight gradient: K is
// the batch's rows) is split along K instead: a tile grid would have each
// thread pack its own copy of a K-long operand, while here each thread packs
// its share of the rows of both, once, and the price is adding nt M x N
// partial products. Worth it when K * min(M, N), the copy a grid repacks,
// exceeds 2 (nt - 1) M N, the partials' reads and writes:
// K > 2 (nt - 1) max(M, N). Timed at 2 threads on GPT-2 tiny's weight
// gradients (128..512 x 128..512 x 2048): alone, 1-11% faster than the best
// grid; in the training step, those products 8-21% faster, the step
// 1.00-1.03x.
bool split_k(int64_t M, int64_t N, int64_t K, int64_t nt) {
  return nt > 1 && K >= nt * kTileAlign && double(K) > 2.0 * double(nt - 1) * double(std::max(M, N));
}

// The K split: K is cut into nt parts (nt the threads asked for, whatever
// team OpenMP gives); part 0 is alpha op(A) op(B) over its rows of K plus
// beta C, written into C, part p > 0 goes into a scratch block, then C adds
// the scratch blocks in part order: the same sums on every run with the same
// thread count; another count moves the result by rounding.
template <typename T>
void gemm_split_k(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                  int64_t ldb, T beta, T* C, int64_t ldc, int64_t nt) {
  thread_local std::vector<T> scratch;  // kept between calls: no page faults per product
  scratch.resize(size_t((nt - 1) * M * N));
  T* part = scratch.data();
#pragma omp parallel num_threads(int(nt))
  {
    // Part p: rows K p / nt to K (p + 1) / nt, at least kTileAlign (split_k).
#pragma omp for schedule(static)
    for (int64_t p = 0; p < nt; ++p) {
      const int64_t k0 = K * p / nt, k = K * (p + 1) / nt - k0;
      const T* a = ta == Trans::N ? A + k0 : A + k0 * lda;  // columns k0.. of op(A)
      const T* b = tb == Trans::N ? B + k0 * ldb : B + k0;  // rows k0.. of op(B)
      if (p == 0)
        blas(ta, tb, M, N, k, alpha, a, lda, b, ldb, beta, C, ldc);
      else
        blas(ta, tb, M, N, k, alpha, a, lda, b, ldb, T(0), part + (p - 1) * M * N, N);
    }  // (the loop's barrier: every part is written before C adds them)
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t p = 0; p < nt - 1; ++p) {
        const T* src = part + p * M * N + i * N;
        T* dst = C + i * ldc;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) dst[j] += src[j];
      }
  }
}

template <typename T>
void gemm_split(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                int64_t ldb, T beta, T* C, int64_t ldc, const Epi<T>& e = {}) {
  blas_single_threaded();
  const int64_t nt = threads_here();
  const bool small = double(M) * double(N) * double(K) < kSplitWork;
  if (!small && split_k(M, N, K, nt)) {
    if (e.any()) fill_epi(M, N, e, C, ldc), beta = T(1);  // (part 0 adds onto it)
    return gemm_split_k(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nt);
  }
  const Grid g = small || nt == 1 ? Grid{} : grid_for(M, N, nt);
  if (g.pm * g.pn == 1) return blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, e);
  const int64_t em = tile_edge(M, g.pm), en = tile_edge(N, g.pn);
#pragma omp parallel for schedule(static) num_threads(int(g.pm * g.pn))
  for (int64_t t = 0; t < g.pm * g.pn; ++t) {
    const int64_t m0 = t / g.pn * em, n0 = t % g.pn * en;
    const int64_t m = std::min(em, M - m0), n = std::min(en, N - n0);
    if (m <= 0 || n <= 0) continue;                       // the rounding to kTileAlign left this tile empty
    const T* a = ta == Trans::N ? A + m0 * lda : A + m0;  // rows m0.. of op(A)
    const T* b = tb == Trans::N ? B + n0 : B + n0 * ldb;  // columns n0.. of op(B)
    blas(ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, C + m0 * ldc + n0, ldc, e.at(m0, n0));
  }
}
}  // namespace

template <>
void gemm<float>(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  gemm_split(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <>
void gemm<double>(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                  const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  gemm_split(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void gemm_bias(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
               const T* bias, const T* R, int64_t ldr, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  gemm_split(ta, tb, M, N, K, T(1), A, lda, B, ldb, T(0), C, ldc, Epi<T>{bias, R, ldr});
}
template void gemm_bias<float>(Trans, Trans, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t,
                               const float*, const float*, int64_t, float*, int64_t);
template void gemm_bias<double>(Trans, Trans, int64_t, int64_t, int64_t, const double*, int64_t, const double*, int64_t,
                                const double*, const double*, int64_t, double*, int64_t);

template <typename T>
void gemm_batched(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                  int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
                  int64_t stride_c, int64_t batch) {
  if (M == 0 || N == 0) return;
  blas_single_threaded();
  // A batch with a product for every thread runs one product per thread; a
  // smaller one splits each product (gemm_split).
  const int64_t nt = threads_here();
  if (nt > 1 && batch >= nt && double(M) * double(N) * double(K) * double(batch) >= kSplitWork) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      blas(ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    gemm<T>(ta, tb, M, N, K, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
}

template void gemm_batched<float>(Trans, Trans, int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                                  const float*, int64_t, int64_t, float, float*, int64_t, int64_t, int64_t);
template void gemm_batched<double>(Trans, Trans, int64_t, int64_t, int64_t, double, const double*, int64_t, int64_t,
                                   const double*, int64_t, int64_t, double, double*, int64_t, int64_t, int64_t);

void warm_threads() {
  // Every thread holds a buffer at the same moment (the barrier), so the pool
  // grows to as many as the step's concurrent single-threaded products need.
#pragma omp parallel
  {
    void* buffer = blas_memory_alloc(0);
    std::vector<float> arena(8192, 1.0f);  // 32 KiB: under glibc's mmap threshold, so from this thread's arena
#pragma omp barrier
    blas_memory_free(buffer);
  }
}

std::string blas_info() {
  const std::string core = openblas_get_corename();
  std::string s = "OpenBLAS " + core + " kernels, " + std::to_string(omp_get_max_threads()) + " threads";
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
