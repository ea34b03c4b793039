// How engine code (plain C++, no CUDA headers) calls the hand-written CUDA
// kernels. Every kernels/cuda/<op>.cu is compiled twice:
//   by nvcc, into namespace eng::cudak   (the `cuda` device; CUDA builds only)
//   by g++ against the emulator, into eng::emuk (the `emu` device; always)
// portable.cuh sets ENGINE_GPU_NS to the right one. Each op's header
// (kernels/cuda/<op>.h) lists its launchers once, in a macro, and
// ENGINE_GPU_DECLARE declares them in both namespaces.
// Launcher conventions: storage dtype as gpu::Storage with untyped pointers
// (the engine's tensors are untyped too), fp32 math whatever the storage,
// int64 sizes, and an opaque stream (a cudaStream_t; nullptr = the default
// stream; the emulator runs every launch to completion).
#pragma once
#include <cstdint>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/kernel_cost.h"

namespace eng::gpu {
enum class Storage : uint8_t { f32, bf16, f16 };

// Whether p is a multiple of bytes (a power of two): the one test made
// before a wide access, by launchers on the host and kernels on the device.
#if defined(__CUDACC__)
#define ENGINE_HOST_DEVICE __host__ __device__
#else
#define ENGINE_HOST_DEVICE
#endif
ENGINE_HOST_DEVICE inline bool aligned_to(const void* p, unsigned bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// The stream launchers use when their stream argument is nullptr (every
// engine call passes nullptr): the legacy default stream, except while a
// CUDA graph is being captured (engine/graph.h), when it is the capture
// stream (CUDA cannot capture the legacy stream). One per host thread, like
// PyTorch's current stream. An inline variable: one instance program-wide,
// shared by the g++- and nvcc-compiled objects.
inline thread_local void* t_current_stream = nullptr;
inline void* current_stream() { return t_current_stream; }

// The storage type of a tensor dtype (callers have checked it is one of the three).
inline Storage storage_of(DType t) {
  return t == DType::bf16 ? Storage::bf16 : t == DType::f16 ? Storage::f16 : Storage::f32;
}
// Bytes per element of a storage type (the cost formulas' sizeof(T)).
inline constexpr double storage_bytes(Storage s) { return s == Storage::f32 ? 4.0 : 2.0; }
}  // namespace eng::gpu

// Calls the launcher `fn` of the device's namespace: eng::emuk (the emulated
// kernels, always built) or eng::cudak (builds with ENGINE_HAVE_CUDA, which
// the engine_kernels_emu target exports to everything that links it). The
// stream argument is left to the caller (nullptr: the default stream).
// While a step profile listens (kernels/kernel_cost.h) the call is a Scope
// named `fn` with the cost eng::kcost::fn(args) gives: the arguments are
// evaluated a second time then, so they must be free of side effects.
#define ENGINE_GPU_COST_SCOPE_(fn, ...) \
  ::eng::kprof::Scope kprof_scope_;     \
  if (::eng::kprof::listening()) kprof_scope_.begin(#fn, ::eng::kcost::fn(__VA_ARGS__))
#if defined(ENGINE_HAVE_CUDA)
#define ENGINE_GPU_CALL(dev, fn, ...)          \
  do {                                         \
    ENGINE_GPU_COST_SCOPE_(fn, __VA_ARGS__);   \
    if ((dev).type == ::eng::DeviceType::cuda) \
      ::eng::cudak::fn(__VA_ARGS__);           \
    else                                       \
      ::eng::emuk::fn(__VA_ARGS__);            \
  } while (0)
#else
#define ENGINE_GPU_CALL(dev, fn, ...)                                                          \
  do {                                                                                         \
    ENGINE_CHECK((dev).type == ::eng::DeviceType::emu, #fn ": this build has no CUDA device"); \
    ENGINE_GPU_COST_SCOPE_(fn, __VA_ARGS__);                                                   \
    ::eng::emuk::fn(__VA_ARGS__);                                                              \
  } while (0)
#endif

#define ENGINE_GPU_DECLARE(LAUNCHERS) \
  namespace eng::emuk {               \
  LAUNCHERS                           \
  }                                   \
  namespace eng::cudak {              \
  LAUNCHERS                           \
  }
