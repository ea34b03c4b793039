// libmvec's vector expf in the cpu kernels' hot rows (see vmath.h).
#include "kernels/cpu/vmath.h"

#include <cmath>

#include "kernels/cpu/gelu_math.h"
#include "kernels/cpu/loops.h"

// glibc's vector variants of expf: this declaration is what lets GCC call
// them from `#pragma omp simd` loops (-fopenmp); libm.so pulls in libmvec.
// x86-64 only (the ISA names below, and libmvec's x86 variants); elsewhere
// the loops stay scalar calls of expf.
#if defined(__x86_64__)
#pragma omp declare simd notinbranch
extern "C" float expf(float) noexcept;
#endif

namespace eng::cpu {

namespace {
// expf as gelu_math.h's callable: inlined, the loops below still call the
// vector expf (the lambda disappears before vectorization).
constexpr auto kExpf = [](float v) { return expf(v); };
}  // namespace

ENGINE_CPU_CLONES float exp_shift_sum(const float* x, float* y, int64_t n, float shift) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = expf(x[i] - shift);
    s += y[i];
  }
  return s;
}

ENGINE_CPU_CLONES float sum_exp_shift(const float* x, int64_t n, float shift) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += expf(x[i] - shift);
  return s;
}

ENGINE_CPU_CLONES void scaled_exp_shift(const float* x, float* y, int64_t n, float shift, float scale) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = scale * expf(x[i] - shift);
}

ENGINE_CPU_CLONES void gelu_forward_f32(const float* x, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = gelu::forward(x[i], kExpf);
}

ENGINE_CPU_CLONES void gelu_backward_f32(const float* x, const float* dout, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu::derivative(x[i], kExpf) * dout[i];
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
