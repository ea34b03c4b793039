// Vectorized exp and tanh for the cpu kernels' fp32 rows (exp: softmax,
// attention's softmax, cross-entropy and its vocab-parallel shards; tanh:
// GELU), through glibc's libmvec: the vector variants of expf
// (_ZGVbN4v_expf SSE, _ZGVdN8v_expf AVX2, _ZGVeN16v_expf AVX-512) and of
// tanhf (_ZGV?N?v_tanhf, glibc 2.35 on; before it GELU takes tanh from one
// exp) that GCC calls from a `#pragma omp simd` loop once the function is
// declared `omp declare simd` (what <math.h> does only under -ffast-math,
// which would change more than these calls). Each function is compiled for
// AVX-512, AVX2 and the baseline (target_clones: the loader picks one for
// the CPU it runs on), so one binary runs everywhere. The double
// instantiations of the kernels keep std::exp and std::tanh: they are the
// references the tests and gradchecks use.
// Accuracy: libmvec's expf is within 4 ulp of the correctly rounded result
// (glibc's manual); against glibc's scalar expf this machine measures at most
// 3 ulp (tests/kernels/test_cpu_vmath.cpp checks <= 4 over the whole range;
// the GELUs against their formula in double).
// Sums are accumulated in the vector lanes, then added, then the last n % 16
// values one by one (those go through one zero-padded 16-wide buffer: vmath.cpp): a
// different order than a scalar loop, the same on every run of one binary on
// one CPU.
// bytes: 4 n read + 4 n written (exp_shift_sum), 4 n (sum_exp_shift); flops
// ~ 20 n (an exp or a tanh counted as ~20; 3 more per element in the GELUs).
#pragma once
#include <cstdint>

namespace eng::cpu {

// y[i] = exp(x[i] - shift), i < n; returns the sum of the y. y may be x.
float exp_shift_sum(const float* x, float* y, int64_t n, float shift);
// sum over i < n of exp(x[i] - shift); nothing stored.
float sum_exp_shift(const float* x, int64_t n, float shift);
// y[i] = scale * exp(x[i] - shift).
void scaled_exp_shift(const float* x, float* y, int64_t n, float shift, float scale);
// GELU (tanh approximation) forward and backward over n contiguous values
// (kernels/cpu/activation.cpp has the formulas), single-threaded.
void gelu_forward_f32(const float* x, float* out, int64_t n);
void gelu_backward_f32(const float* x, const float* dout, float* dx, int64_t n);
// Which vector width the functions above run at here: "avx512f", "avx2" or
// "sse2" (the clone the loader chose; for the benchmark's output), "scalar"
// off x86-64.
const char* vmath_isa();

}  // namespace eng::cpu
