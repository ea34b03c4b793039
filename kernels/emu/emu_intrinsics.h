// Device intrinsics that the host lacks, for kernels compiled by g++ against
// the emulator (included by emu.h; never directly). Grouped as the CUDA
// programming guide groups them: atomics, fast math, bit tricks, cache-hinted
// loads and stores, fences.
//
// Conventions:
// - Atomics use GCC __atomic builtins with relaxed ordering, as CUDA atomics
//   are relaxed. Within one launch every fiber runs on one OS thread and is
//   only switched at barriers and warp collectives, so an atomic can never be
//   torn; the builtins keep it correct if the memory is shared with other host
//   threads too. Float/double read-modify-writes are compare-and-swap loops.
// - Fast-math intrinsics (__expf, __fdividef...) compute the accurate host
//   result. The GPU versions are less accurate, so a test that passes here
//   needs the tolerance of the GPU build's documented error bounds as well.
// - Everything is in the global namespace, where CUDA puts it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// ---- atomics -------------------------------------------------------------
#define EMU_ATOMIC_INT_(name, builtin)                                                                  \
  inline int name(int* a, int v) { return builtin(a, v, __ATOMIC_RELAXED); }                            \
  inline unsigned int name(unsigned int* a, unsigned int v) { return builtin(a, v, __ATOMIC_RELAXED); } \
  inline unsigned long long name(unsigned long long* a, unsigned long long v) {                         \
    return builtin(a, v, __ATOMIC_RELAXED);                                                             \
  }
EMU_ATOMIC_INT_(atomicAdd, __atomic_fetch_add)
EMU_ATOMIC_INT_(atomicAnd, __atomic_fetch_and)
EMU_ATOMIC_INT_(atomicOr, __atomic_fetch_or)
EMU_ATOMIC_INT_(atomicXor, __atomic_fetch_xor)
EMU_ATOMIC_INT_(atomicExch, __atomic_exchange_n)
#undef EMU_ATOMIC_INT_
inline int atomicSub(int* a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
inline unsigned int atomicSub(unsigned int* a, unsigned int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }

// Compare-and-swap: returns the old value whether or not it swapped, as CUDA.
template <typename T>
T emu_atomic_cas_(T* a, T compare, T val) {
  __atomic_compare_exchange(a, &compare, &val, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;  // on failure the builtin stored the current value here
}
inline int atomicCAS(int* a, int c, int v) { return emu_atomic_cas_(a, c, v); }
inline unsigned int atomicCAS(unsigned int* a, unsigned int c, unsigned int v) { return emu_atomic_cas_(a, c, v); }
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
  return emu_atomic_cas_(a, c, v);
}
inline unsigned short atomicCAS(unsigned short* a, unsigned short c, unsigned short v) {
  return emu_atomic_cas_(a, c, v);
}

// Any read-modify-write as a CAS loop on the value's own type (bitwise compare,
// so a NaN or -0.0 in memory does not spin forever).
template <typename T, typename F>
T emu_atomic_rmw_(T* a, F f) {
  T old;
  __atomic_load(a, &old, __ATOMIC_RELAXED);
  T desired = f(old);
  while (!__atomic_compare_exchange(a, &old, &desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) desired = f(old);
  return old;
}
inline float atomicAdd(float* a, float v) {
  return emu_atomic_rmw_(a, [v](float x) { return x + v; });
}
inline double atomicAdd(double* a, double v) {
  return emu_atomic_rmw_(a, [v](double x) { return x + v; });
}
inline float atomicExch(float* a, float v) {
  float old;
  __atomic_exchange(a, &v, &old, __ATOMIC_RELAXED);
  return old;
}
template <typename T>
T emu_atomic_max_(T* a, T v) {
  return emu_atomic_rmw_(a, [v](T x) { return x < v ? v : x; });
}
template <typename T>
T emu_atomic_min_(T* a, T v) {
  return emu_atomic_rmw_(a, [v](T x) { return v < x ? v : x; });
}
inline int atomicMax(int* a, int v) { return emu_atomic_max_(a, v); }
inline unsigned int atomicMax(unsigned int* a, unsigned int v) { return emu_atomic_max_(a, v); }
inline long long atomicMax(long long* a, long long v) { return emu_atomic_max_(a, v); }
inline unsigned long long atomicMax(unsigned long long* a, unsigned long long v) { return emu_atomic_max_(a, v); }
inline int atomicMin(int* a, int v) { return emu_atomic_min_(a, v); }
inline unsigned int atomicMin(unsigned int* a, unsigned int v) { return emu_atomic_min_(a, v); }
inline long long atomicMin(long long* a, long long v) { return emu_atomic_min_(a, v); }
inline unsigned long long atomicMin(unsigned long long* a, unsigned long long v) { return emu_atomic_min_(a, v); }
// atomicInc/Dec wrap as the guide defines: ((old >= v) ? 0 : old + 1) and
// ((old == 0 || old > v) ? v : old - 1).
inline unsigned int atomicInc(unsigned int* a, unsigned int v) {
  return emu_atomic_rmw_(a, [v](unsigned int x) { return x >= v ? 0u : x + 1; });
}
inline unsigned int atomicDec(unsigned int* a, unsigned int v) {
  return emu_atomic_rmw_(a, [v](unsigned int x) { return (x == 0 || x > v) ? v : x - 1; });
}

// ---- float math ----------------------------------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x), *c = std::cos(x); }
inline float __tanhf(float x) { return std::tanh(x); }
inline float __fdividef(float x, float y) { return x / y; }
// The _rn intrinsics round their one operation: nvcc never fuses them into an
// FMA. Under ENGINE_EMU_FMA g++ contracts plain a * b - c, as nvcc does, so
// their result passes through an empty asm that the contraction cannot see past.
inline float emu_rounded(float r) {
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(r));
  return r;
#else
  volatile float v = r;
  return v;
#endif
}
inline float __fdiv_rn(float x, float y) { return emu_rounded(x / y); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __fadd_rn(float x, float y) { return emu_rounded(x + y); }
inline float __fsub_rn(float x, float y) { return emu_rounded(x - y); }
inline float __fmul_rn(float x, float y) { return emu_rounded(x * y); }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0, as the guide says
inline int __float2int_rn(float x) { return int(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return int(x); }
inline int __float2int_rd(float x) { return int(std::floor(x)); }
inline int __float2int_ru(float x) { return int(std::ceil(x)); }
inline unsigned int __float2uint_rn(float x) { return static_cast<unsigned int>(std::nearbyint(x)); }
inline float __int2float_rn(int x) { return float(x); }
inline float __uint2float_rn(unsigned int x) { return float(x); }

// min/max as CUDA overloads them for device code (same-type pairs).
#define EMU_MINMAX_(T)                             \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
EMU_MINMAX_(int)
EMU_MINMAX_(unsigned int)
EMU_MINMAX_(long long)
EMU_MINMAX_(unsigned long long)
#undef EMU_MINMAX_
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- bit reinterpretation and counting -----------------------------------
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline unsigned int __float_as_uint(float x) { return static_cast<unsigned int>(__float_as_int(x)); }
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline float __uint_as_float(unsigned int i) { return __int_as_float(static_cast<int>(i)); }
inline long long __double_as_longlong(double x) {
  long long i;
  std::memcpy(&i, &x, 8);
  return i;
}
inline double __longlong_as_double(long long i) {
  double x;
  std::memcpy(&x, &i, 8);
  return x;
}
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
  unsigned int r = 0;
  for (int i = 0; i < 32; ++i, x >>= 1) r = (r << 1) | (x & 1u);
  return r;
}

// ---- cache-hinted loads and stores: hints only, plain accesses here -------
template <typename T>
T __ldg(const T* p) {
  return *p;
}
template <typename T>
T __ldcg(const T* p) {
  return *p;
}
template <typename T>
T __ldca(const T* p) {
  return *p;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
template <typename T>
T __ldlu(const T* p) {
  return *p;
}
template <typename T>
T __ldcv(const T* p) {
  return *p;
}
template <typename T>
void __stcg(T* p, T v) {
  *p = v;
}
template <typename T>
void __stcs(T* p, T v) {
  *p = v;
}
template <typename T>
void __stwb(T* p, T v) {
  *p = v;
}
template <typename T>
void __stwt(T* p, T v) {
  *p = v;
}

// ---- fences --------------------------------------------------------------
// One OS thread runs the whole launch and fibers switch only inside
// out-of-line emulator calls, so every write is visible to the next fiber.
// A fence is therefore a compiler barrier only; a kernel that *needs* one on
// the GPU is not caught when it omits it (docs/emulator.md, limits).
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
