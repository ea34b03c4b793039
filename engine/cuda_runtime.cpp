// CUDA runtime calls behind engine/cuda_runtime.h, compiled only when
// ENGINE_CUDA is on. Every call goes through CUDA_CHECK so a failure names
// the call and its file:line.
#include "engine/cuda_runtime.h"

#include <cuda_runtime.h>

#include "engine/error.h"

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    cudaError_t err_ = (call);                                                       \
    ENGINE_CHECK(err_ == cudaSuccess, #call, " failed: ", cudaGetErrorString(err_)); \
  } while (0)

namespace eng::cudart {
bool built() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no GPU: clear the sticky error
    return 0;
  }
  return n;
}

void* malloc_device(size_t bytes, int device) {
  CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void free_device(void* ptr) { (void)cudaFree(ptr); }

void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  const cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                            : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
}
}  // namespace eng::cudart
