// The tensor-core instructions a kernel uses, one spelling for both builds:
// under nvcc each wrapper is the PTX instruction itself (inline asm, sm_80
// and later); under g++ it is the emulator's warp-collective model of it
// (kernels/emu/tensor_core.h, which has the fragment layouts), so a kernel
// written with these runs in CI like every other kernel. docs/emulator.md,
// "Tensor cores", draws who holds what.
//
//   mma_m16n8k16_{bf16,f16}(d, a, b, c)  d = a b + c; a: 4 registers (16 x 16
//       row-major, two 16-bit elements each), b: 2 (16 x 8, column-major),
//       c, d: 4 fp32 (16 x 8). mma_m16n8k8_{bf16,f16}: a 2 registers, b 1.
//   ldmatrix_x{1,2,4}[_trans](r, addr)  one, two or four 8 x 8 matrices of
//       16-bit elements from shared memory; lane 8 m + i gives the address
//       of row i of matrix m (16 bytes, 16-byte aligned).
//   cp_async_ca<4|8|16>(dst, src[, src_bytes]), cp_async_cg(dst, src[, src_bytes])
//       an asynchronous copy global -> shared of 4/8/16 bytes (cg: 16, L2
//       only), the bytes past src_bytes zero-filled; it lands at the
//       cp_async_wait_group<N>() (all but the newest N committed groups) or
//       cp_async_wait_all() that covers it, never before: read it only after
//       that wait (and a __syncthreads() for the other threads).
//   cp_async_commit()  closes the group of the copies issued since the last one.
//   smem_addr(p)  the 32-bit shared address of a pointer into shared memory
//       (__cvta_generic_to_shared), as the instructions above take it.
// Every one is warp-synchronous where the PTX ISA says .sync.aligned (mma,
// ldmatrix): all 32 lanes, converged, at the same instruction.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/portable.cuh"

#if !defined(__CUDACC__)
#include <source_location>

#include "kernels/emu/tensor_core.h"
#endif

namespace eng::tc {

#if defined(__CUDACC__)

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#define ENGINE_TC_MMA_K16(name, type)                                                                        \
  __device__ __forceinline__ void name(float(&d)[4], const uint32_t(&a)[4], const uint32_t(&b)[2],           \
                                       const float(&c)[4]) {                                                 \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." type "." type                                               \
        ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "                                                       \
        "{%10,%11,%12,%13};\n"                                                                               \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                     \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), \
          "f"(c[3]));                                                                                        \
  }
#define ENGINE_TC_MMA_K8(name, type)                                                               \
  __device__ __forceinline__ void name(float(&d)[4], const uint32_t(&a)[2], const uint32_t(&b)[1], \
                                       const float(&c)[4]) {                                       \
    asm("mma.sync.aligned.m16n8k8.row.col.f32." type "." type                                      \
        ".f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "                                                      \
        "{%7,%8,%9,%10};\n"                                                                        \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                           \
        : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));            \
  }
ENGINE_TC_MMA_K16(mma_m16n8k16_bf16, "bf16")
ENGINE_TC_MMA_K16(mma_m16n8k16_f16, "f16")
ENGINE_TC_MMA_K8(mma_m16n8k8_bf16, "bf16")
ENGINE_TC_MMA_K8(mma_m16n8k8_f16, "f16")
#undef ENGINE_TC_MMA_K16
#undef ENGINE_TC_MMA_K8

// The ldmatrix family: the address operand is a shared-state-space address.
__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <int kBytes>
__device__ __forceinline__ void cp_async_ca(uint32_t dst, const void* src, int src_bytes = kBytes) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(kBytes), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_cg(uint32_t dst, const void* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

#else  // g++: the emulator; each wrapper passes its call site on for messages

using Site = std::source_location;

inline uint32_t smem_addr(const void* p, Site s = Site::current()) {
  return ::emu::shared_address(p, "__cvta_generic_to_shared", s.file_name(), int(s.line()));
}

inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                              Site s = Site::current()) {
  ::emu::tc::mma(::emu::tc::Mma::m16n8k16_bf16, d, a, b, c, s.file_name(), int(s.line()));
}
inline void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                             Site s = Site::current()) {
  ::emu::tc::mma(::emu::tc::Mma::m16n8k16_f16, d, a, b, c, s.file_name(), int(s.line()));
}
inline void mma_m16n8k8_bf16(float (&d)[4], const uint32_t (&a)[2], const uint32_t (&b)[1], const float (&c)[4],
                             Site s = Site::current()) {
  ::emu::tc::mma(::emu::tc::Mma::m16n8k8_bf16, d, a, b, c, s.file_name(), int(s.line()));
}
inline void mma_m16n8k8_f16(float (&d)[4], const uint32_t (&a)[2], const uint32_t (&b)[1], const float (&c)[4],
                            Site s = Site::current()) {
  ::emu::tc::mma(::emu::tc::Mma::m16n8k8_f16, d, a, b, c, s.file_name(), int(s.line()));
}

inline void ldmatrix_x1(uint32_t (&r)[1], uint32_t addr, Site s = Site::current()) {
  ::emu::tc::ldmatrix(1, false, r, addr, s.file_name(), int(s.line()));
}
inline void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr, Site s = Site::current()) {
  ::emu::tc::ldmatrix(2, false, r, addr, s.file_name(), int(s.line()));
}
inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr, Site s = Site::current()) {
  ::emu::tc::ldmatrix(4, false, r, addr, s.file_name(), int(s.line()));
}
inline void ldmatrix_x1_trans(uint32_t (&r)[1], uint32_t addr, Site s = Site::current()) {
  ::emu::tc::ldmatrix(1, true, r, addr, s.file_name(), int(s.line()));
}
inline void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr, Site s = Site::current()) {
  ::emu::tc::ldmatrix(2, true, r, addr, s.file_name(), int(s.line()));
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr, Site s = Site::current()) {
  ::emu::tc::ldmatrix(4, true, r, addr, s.file_name(), int(s.line()));
}

template <int kBytes>
inline void cp_async_ca(uint32_t dst, const void* src, int src_bytes = kBytes, Site s = Site::current()) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  ::emu::tc::cp_async("cp.async.ca.shared.global", dst, src, kBytes, src_bytes, s.file_name(), int(s.line()));
}
inline void cp_async_cg(uint32_t dst, const void* src, int src_bytes = 16, Site s = Site::current()) {
  ::emu::tc::cp_async("cp.async.cg.shared.global", dst, src, 16, src_bytes, s.file_name(), int(s.line()));
}
inline void cp_async_commit(Site s = Site::current()) { ::emu::cp_async_commit(s.file_name(), int(s.line())); }
template <int N>
inline void cp_async_wait_group(Site s = Site::current()) {
  static_assert(N >= 0, "cp.async.wait_group N: N >= 0");
  ::emu::tc::cp_async_wait(N, s.file_name(), int(s.line()));
}
inline void cp_async_wait_all(Site s = Site::current()) {
  ::emu::cp_async_commit(s.file_name(), int(s.line()));
  ::emu::tc::cp_async_wait(0, s.file_name(), int(s.line()));
}

#endif

// Two floats as one register of two 16-bit elements (lo in the low half),
// the operand format of the mma wrappers.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat16 l = __float2bfloat16(lo), h = __float2bfloat16(hi);
  uint16_t lb, hb;
  memcpy(&lb, &l, 2);
  memcpy(&hb, &h, 2);
  return uint32_t(lb) | uint32_t(hb) << 16;
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  const __half l = __float2half(lo), h = __float2half(hi);
  uint16_t lb, hb;
  memcpy(&lb, &l, 2);
  memcpy(&hb, &h, 2);
  return uint32_t(lb) | uint32_t(hb) << 16;
}

// The same by storage type, for kernels templated on it: T = __nv_bfloat16 or
// __half; d = a b + d.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return pack_bf16x2(lo, hi);
  else
    return pack_f16x2(lo, hi);
}
#if defined(__CUDACC__)
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    mma_m16n8k16_bf16(d, a, b, d);
  else
    mma_m16n8k16_f16(d, a, b, d);
}
#else  // the caller's site passed on: .aligned is checked per call site
template <typename T>
inline void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], Site s = Site::current()) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    mma_m16n8k16_bf16(d, a, b, d, s);
  else
    mma_m16n8k16_f16(d, a, b, d, s);
}
#endif

}  // namespace eng::tc
