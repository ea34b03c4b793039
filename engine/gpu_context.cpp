// The per-cuda-device contexts of engine/gpu_context.h (CUDA builds only).
#include "engine/gpu_context.h"

#include <map>
#include <mutex>

#include "base/error.h"

namespace eng {

CublasLtContext& GpuContext::cublaslt() {
  if (!cublaslt_) cublaslt_ = std::make_unique<CublasLtContext>(device_);
  return *cublaslt_;
}

CudnnContext& GpuContext::cudnn() {
  if (!cudnn_) cudnn_ = std::make_unique<CudnnContext>(device_);
  return *cudnn_;
}

GpuContext& gpu_context(int device) {
  ENGINE_CHECK(device >= 0, "gpu_context: bad cuda device index ", device);
  // Created on first use and never destroyed (see the header).
  static std::mutex mu;
  static auto* table = new std::map<int, std::unique_ptr<GpuContext>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*table)[device];
  if (!slot) slot = std::make_unique<GpuContext>(device);
  return *slot;
}

}  // namespace eng
