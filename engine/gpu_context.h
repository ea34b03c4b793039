// Per-device state of the cuda device: the cuBLASLt context (handle,
// workspace, heuristic cache) every GEMM on that device goes through, the
// compute mode f32 GEMMs run in, and the cuDNN context (--attention cudnn).
// CUDA builds only (gpu_context.cpp); code that uses it sits behind
// ENGINE_HAVE_CUDA.
//
// Why a function returning a per-device object rather than a global in a
// header (no globals in headers, no hidden state):
//  - the handle and its 32 MiB workspace belong to one device, so there is
//    one context per device index, not one per process;
//  - it is created lazily, on the first GEMM on that device: CPU-only and emu
//    runs, and machines without a driver, never call cublasLtCreate or
//    cudaMalloc just because the library was linked (a static object would,
//    at load time, in an unspecified order relative to the CUDA runtime);
//  - the ops' signatures (matmul(a, b, ...)) carry no context argument; the
//    tensor's device is what leads to its context, and this function is the
//    one place that mapping lives. Tests and benchmarks can still build their
//    own CublasLtContext and pass it to eng::gemm directly.
// The contexts live until the process exits and are deliberately not
// destroyed (like the device allocators in device.cpp): tensors and streams
// torn down during static destruction may still reach them, and destroying a
// cuBLAS handle after the CUDA runtime has shut down is undefined.
#pragma once
#include <memory>

#include "kernels/cudnn/cudnn.h"
#include "kernels/gemm/cublaslt.h"

namespace eng {

class GpuContext {
 public:
  explicit GpuContext(int device) : device_(device) {}
  int device() const { return device_; }
  // Created on first use (needs a working GPU).
  CublasLtContext& cublaslt();
  // The cuDNN handle and its attention plans (kernels/cudnn/cudnn.h), created
  // on first use; throws, saying why, where cuDNN cannot run.
  CudnnContext& cudnn();
  // The compute mode of GEMMs on f32 storage: fp32 (precision O0) or tf32
  // (O1, set by the precision code). bf16/f16 storage always accumulates in
  // fp32 (ComputeMode::bf16 / fp16).
  ComputeMode f32_gemm_mode = ComputeMode::fp32;

 private:
  int device_;
  std::unique_ptr<CublasLtContext> cublaslt_;
  std::unique_ptr<CudnnContext> cudnn_;
};

// The context of cuda device `device`, created on first use. Thread-safe to
// look up; the context itself serves one stream at a time.
GpuContext& gpu_context(int device);

}  // namespace eng
