// The one header every hand-written CUDA kernel source includes. The same
// source is compiled two ways (docs/emulator.md says why):
//   nvcc (__CUDACC__ defined): plain CUDA, for the `cuda` device;
//   g++:  the CUDA-on-CPU emulator (kernels/emu/emu.h), for the `emu` device,
//         for CI (which has no GPU), and for stepping through a kernel in gdb.
// Beyond the CUDA language itself, kernels use only these three spellings,
// which mean the same on both paths:
//
//   LAUNCH_KERNEL(kernel, grid, block, smem_bytes, stream, args...);
//       kernel<<<grid, block, smem_bytes, stream>>>(args...) and a launch
//       check. nvcc: cudaGetLastError(), reported like CUDA_CHECK with the
//       LAUNCH_KERNEL line. g++: the emulated launch, which runs to completion
//       and throws eng::Error for a broken launch configuration, barrier or
//       warp collective. A macro (not a function) only to capture file:line;
//       template kernels need no parentheses: LAUNCH_KERNEL(k<float, 4>, ...).
//   DYNAMIC_SMEM(T, name);
//       T* const name pointing at the launch's dynamic shared memory
//       (`extern __shared__`, which the emulator cannot provide). 16-byte
//       aligned; every use in a kernel aliases the same bytes, as in CUDA.
//   CUDA_CHECK(call);
//       nvcc only: throws eng::Error "file:line: call failed: reason"
//       (base/error.h's idiom).
//
// Also here, for both paths: gpu::allow_dynamic_smem<kernel>(bytes) (a
// launch asking for more than 48 KiB of dynamic shared memory needs it
// first), load_relaxed (a relaxed atomic load) and atomic_max_float, the
// usual compare-and-swap float max (CUDA has no float atomicMax).
//
// Under g++ a kernel TU must not include <cuda_runtime.h>: the emulator
// supplies the device-side names that header declares.
#pragma once

// ENGINE_GPU_NS: the namespace a kernel file's launchers live in (see
// kernels/cuda/gpu_ops.h): eng::cudak under nvcc, eng::emuk under g++.
#if defined(__CUDACC__)
#define ENGINE_GPU_NS cudak
#else
#define ENGINE_GPU_NS emuk
#endif

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "base/error.h"
#include "kernels/kernel_cost.h"

#define ENGINE_CUDA_CHECK_AT(file, line, call)                                                                         \
  do {                                                                                                                 \
    const cudaError_t err_ = (call);                                                                                   \
    if (err_ != cudaSuccess) ::eng::throw_error(file, line, ::eng::cat(#call, " failed: ", cudaGetErrorString(err_))); \
  } while (0)
#ifndef CUDA_CHECK
#define CUDA_CHECK(call) ENGINE_CUDA_CHECK_AT(__FILE__, __LINE__, call)
#endif

#define DYNAMIC_SMEM(T, name)                                           \
  extern __shared__ __align__(16) unsigned char engine_dynamic_smem_[]; \
  T* const name = reinterpret_cast<T*>(engine_dynamic_smem_)

namespace eng::gpu {
template <typename... Params, typename... Args>
void launch_kernel_at(const char* file, int line, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                      cudaStream_t stream, Args&&... args) {
  ::eng::kprof::count_launch();
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  ENGINE_CUDA_CHECK_AT(file, line, cudaGetLastError());
}
}  // namespace eng::gpu
#define LAUNCH_KERNEL(...) ::eng::gpu::launch_kernel_at(__FILE__, __LINE__, __VA_ARGS__)

#else  // g++: the emulator

#include "kernels/emu/emu.h"

#define DYNAMIC_SMEM(T, name) T* const name = reinterpret_cast<T*>(::emu::dynamic_smem(__FILE__, __LINE__))
#define LAUNCH_KERNEL(...) ::emu::launch_kernel_at(__FILE__, __LINE__, #__VA_ARGS__, __VA_ARGS__)

#endif

namespace eng::gpu {
// More than 48 KiB of dynamic shared memory must be asked for, once per
// kernel (the attribute stays set for the process's device); the emulator
// refuses such a launch without it, as a GPU does ("invalid argument"). The
// kernel is the template argument, so each has its own `once`: keyed on the
// parameter types instead, kernels of one signature would share it, and all
// but the first launched be refused (the H200 found that).
template <auto kKernel>
void allow_dynamic_smem(size_t bytes) {
  static const bool once = [bytes] {
#if defined(__CUDACC__)
    CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
#else
    ::emu::set_max_dynamic_smem(reinterpret_cast<std::uintptr_t>(kKernel), bytes);
#endif
    return true;
  }();
  (void)once;
}
}  // namespace eng::gpu

// A relaxed atomic load, for reading memory that other threads update with
// atomics: a plain load there is a data race in CUDA's memory model (and
// the emulator's race check reports it). In CUDA a volatile access is a
// relaxed one at system scope (PTX ISA, memory consistency model); under
// the emulator it is the __atomic builtin that ThreadSanitizer understands.
template <typename T>
__device__ __forceinline__ T load_relaxed(const T* address) {
#if defined(__CUDACC__)
  return *static_cast<const volatile T*>(address);
#else
  return __atomic_load_n(address, __ATOMIC_RELAXED);
#endif
}

// max(*address, val) stored atomically; returns the old value. NaN operands
// never win (the comparison is false), so a NaN input leaves *address alone.
__device__ __forceinline__ float atomic_max_float(float* address, float val) {
  int* const bits = reinterpret_cast<int*>(address);
  int old = load_relaxed(bits);
  while (val > __int_as_float(old)) {
    const int assumed = old;
    old = atomicCAS(bits, assumed, __float_as_int(val));
    if (old == assumed) break;
  }
  return __int_as_float(old);
}
