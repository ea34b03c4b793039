// libmvec's vector expf and tanhf in the cpu kernels' hot rows (see vmath.h).
#include "kernels/cpu/vmath.h"

#include <cmath>

#include "kernels/cpu/gelu_math.h"
#include "kernels/cpu/loops.h"

// glibc's vector variants of expf (and tanhf, in libmvec since glibc 2.35):
// these declarations are what lets GCC call them from `#pragma omp simd`
// loops (-fopenmp); libm.so pulls in libmvec. x86-64 only (the ISA names
// below, and libmvec's x86 variants); elsewhere the loops stay scalar calls.
#if defined(__x86_64__)
#pragma omp declare simd notinbranch
extern "C" float expf(float) noexcept;
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)  // (nested: an undefined macro call does not parse in #if)
#if __GLIBC_PREREQ(2, 35)
#define ENGINE_VMATH_TANHF 1
#pragma omp declare simd notinbranch
extern "C" float tanhf(float) noexcept;
#endif
#endif
#endif

namespace eng::cpu {

namespace {
// tanh as gelu_math.h's callable: inlined, the GELU loops below still call
// the vector tanhf (the lambda disappears before vectorization). Without
// libmvec's tanhf (glibc < 2.35, or not x86-64): tanh from one exp.
#if defined(ENGINE_VMATH_TANHF)
constexpr auto kTanhf = [](float v) { return tanhf(v); };
#else
constexpr auto kTanhf = [](float v) { return 1.f - 2.f / (expf(2.f * v) + 1.f); };
#endif

// A row's last n % 16 values: GCC ends a vectorized loop with one scalar
// expf call per value left over (libmvec's masked variants are not what it
// calls here), up to 15 calls at ~20 cycles each against ~1 for a value in a
// vector. Attention's causal rows (1 to T values each) spent 40% of their exp
// time there. Instead the tail, padded with zeros, goes through one more
// 16-wide call in a buffer (the AVX2 and baseline clones: 2 or 4 calls), and
// only its r values are stored: nothing past y[n - 1] is written. A lambda,
// so GCC inlines it into each clone and its loop takes that clone's width
// (checked in the object code: one 16-wide call in the AVX-512 clone). Timed
// on AVX-512 only; where the clone is narrower a short tail costs 2 or 4
// vector calls against the 1-7 scalar ones it replaces.
constexpr int64_t kTail = 16;
// Where a row's full 16-value vectors end.
int64_t vector_end(int64_t n) { return n / kTail * kTail; }
// put(i, exp(x[i] - shift)) for the tail i in [nv, n), nv = vector_end(n).
constexpr auto kExpTail = [](const float* x, int64_t nv, int64_t n, float shift, auto put) {
  if (nv == n) return;
  float buf[kTail];
  for (int64_t i = 0; i < kTail; ++i) buf[i] = nv + i < n ? x[nv + i] - shift : 0.f;
#pragma omp simd
  for (int64_t i = 0; i < kTail; ++i) buf[i] = expf(buf[i]);
  for (int64_t i = nv; i < n; ++i) put(i, buf[i - nv]);
};
}  // namespace

ENGINE_CPU_CLONES float exp_shift_sum(const float* x, float* y, int64_t n, float shift) {
  const int64_t nv = vector_end(n);
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < nv; ++i) {
    y[i] = expf(x[i] - shift);
    s += y[i];
  }
  kExpTail(x, nv, n, shift, [&](int64_t i, float e) { s += (y[i] = e); });
  return s;
}

ENGINE_CPU_CLONES float sum_exp_shift(const float* x, int64_t n, float shift) {
  const int64_t nv = vector_end(n);
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < nv; ++i) s += expf(x[i] - shift);
  kExpTail(x, nv, n, shift, [&](int64_t, float e) { s += e; });
  return s;
}

ENGINE_CPU_CLONES void scaled_exp_shift(const float* x, float* y, int64_t n, float shift, float scale) {
  const int64_t nv = vector_end(n);
#pragma omp simd
  for (int64_t i = 0; i < nv; ++i) y[i] = scale * expf(x[i] - shift);
  kExpTail(x, nv, n, shift, [&](int64_t i, float e) { y[i] = scale * e; });
}

ENGINE_CPU_CLONES void gelu_forward_f32(const float* x, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = gelu::forward(x[i], kTanhf);
}

ENGINE_CPU_CLONES void gelu_backward_f32(const float* x, const float* dout, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu::derivative(x[i], kTanhf) * dout[i];
}

const char* vmath_isa() {
#if !defined(__x86_64__)
  return "scalar";
#elif !ENGINE_CPU_HAS_CLONES
  return "sse2";
#else
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? "avx512f" : __builtin_cpu_supports("avx2") ? "avx2" : "sse2";
#endif
}

}  // namespace eng::cpu
