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

namespace eng::gpu {
enum class Storage : uint8_t { f32, bf16, f16 };
}  // namespace eng::gpu

#define ENGINE_GPU_DECLARE(LAUNCHERS) \
  namespace eng::emuk {               \
  LAUNCHERS                           \
  }                                   \
  namespace eng::cudak {              \
  LAUNCHERS                           \
  }
