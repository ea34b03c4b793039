// How the cpu kernels' hot loops get the machine's vector width and its
// threads.
//
// ENGINE_CPU_CLONES compiles a function three times, for AVX-512, AVX2 and
// the x86-64 baseline (SSE2, 4 float lanes), and the loader picks the one the
// CPU runs (GCC's target_clones: an ifunc resolved once at load time). One
// binary runs on every x86-64 CPU and still fills 16 lanes where the CPU has
// them; without it every loop here is built for the baseline.
// AVX-512F has FMA instructions of its own; the kernels are built with
// -ffp-contract=off (kernels/CMakeLists.txt), so every clone rounds each
// element's arithmetic as the baseline does; only `omp simd` reductions
// differ, adding in 4, 8 or 16 lanes (one order per CPU, the same on every
// run).
// The sanitizers' runtimes and ifunc resolvers do not mix (a resolver runs
// before the runtime is up): there, the baseline only; likewise with
// another compiler than GCC, the one the clones are built and tested with.
//
// OpenMP outlines a parallel loop's body into a function of its own before
// GCC makes the clones, and that function keeps the baseline target. So a
// parallel kernel splits its range here (parallel_spans) and calls a cloned
// function on each span, or calls one per row from its parallel loop.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#if !defined(__x86_64__) || !defined(__GNUC__) || defined(__clang__) || defined(__SANITIZE_ADDRESS__) || \
    defined(__SANITIZE_THREAD__)
#define ENGINE_CPU_CLONES
#define ENGINE_CPU_HAS_CLONES 0
#else
#define ENGINE_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define ENGINE_CPU_HAS_CLONES 1
#endif

namespace eng::cpu {

// One contiguous span of [0, n) per thread (cut at multiples of 16 elements,
// whole cache lines of floats), f(lo, hi) on each; f(0, n) on the calling
// thread when n <= min_parallel.
template <typename F>
void parallel_spans(int64_t n, int64_t min_parallel, F&& f) {
  if (n <= min_parallel || omp_get_max_threads() == 1) {
    f(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_num_threads(), i = omp_get_thread_num();
    auto cut = [&](int64_t j) { return j == t ? n : std::min(n, (n * j / t) & ~int64_t(15)); };
    const int64_t lo = cut(i), hi = cut(i + 1);
    if (lo < hi) f(lo, hi);
  }
}

// Column sums (a bias's or layernorm's gradient over rows) run on bands of
// columns, one thread per band walking the rows in order: every column's sum
// has one order whatever the thread count. The width: a multiple of 16
// between 16 and kMaxBand giving the threads equal shares where the columns
// allow (C = 192 on 2 threads: 4 bands of 48; C = 128 on 8: 8 of 16).
constexpr int64_t kMaxBand = 64;
inline int64_t band_width(int64_t C) {
  const int64_t t = omp_get_max_threads(), per = (C + t * kMaxBand - 1) / (t * kMaxBand);
  return std::clamp(((C + t * per - 1) / (t * per) + 15) / 16 * 16, int64_t(16), kMaxBand);
}

// The sum over the threads' spans of f(lo, hi) (a double each), added in
// span order: the same result on every run with the same thread count.
template <typename F>
double parallel_span_sum(int64_t n, int64_t min_parallel, F&& f) {
  if (n <= min_parallel || omp_get_max_threads() == 1) return f(int64_t(0), n);
  std::vector<double> part(size_t(omp_get_max_threads()), 0.0);
  parallel_spans(n, 0, [&](int64_t lo, int64_t hi) { part[size_t(omp_get_thread_num())] = f(lo, hi); });
  double s = 0;
  for (double p : part) s += p;
  return s;
}

}  // namespace eng::cpu
