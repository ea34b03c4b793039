// CUDA runtime calls behind engine/cuda_runtime.h, compiled only when
// ENGINE_CUDA is on. Every call goes through CUDA_CHECK so a failure names
// the call and its file:line.
#include "engine/cuda_runtime.h"

#include <cuda_runtime.h>

#include "base/error.h"

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

void* try_malloc_device(size_t bytes, int device) {
  CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it, the caller reports it
    return nullptr;
  }
  CUDA_CHECK(e);
  return p;
}

size_t free_device_memory(int device, size_t* total) {
  CUDA_CHECK(cudaSetDevice(device));
  size_t f = 0, t = 0;
  CUDA_CHECK(cudaMemGetInfo(&f, &t));
  if (total) *total = t;
  return f;
}

void free_device(void* ptr) { (void)cudaFree(ptr); }

void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  const cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                            : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

int sm_count(int device) {
  int n = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

void memset_device(void* ptr, int value, size_t bytes) { CUDA_CHECK(cudaMemset(ptr, value, bytes)); }

void* event_create() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void event_destroy(void* event) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

void event_record(void* event) { CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), nullptr)); }

float event_elapsed_ms(void* start, void* stop) {
  CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(stop)));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(stop)));
  return ms;
}

void event_record_on(void* event, void* stream) {
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void stream_wait_event(void* stream, void* event) {
  CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

bool event_query(void* event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) return false;
  CUDA_CHECK(e);
  return true;
}

void event_synchronize(void* event) { CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }

void* stream_create(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void stream_destroy(void* stream) { (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream)); }

void stream_synchronize(void* stream) { CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))); }

void memcpy_async(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes, void* stream) {
  const cudaMemcpyKind kind = dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                            : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, static_cast<cudaStream_t>(stream)));
}

void launch_host_func(void* stream, void (*fn)(void*), void* data) {
  CUDA_CHECK(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, data));
}

void* malloc_host(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void free_host(void* ptr) { (void)cudaFreeHost(ptr); }

void capture_begin(void* stream) {
  CUDA_CHECK(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed));
}

void* capture_end(void* stream) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph is self-contained
  ENGINE_CHECK(err == cudaSuccess, "cudaGraphInstantiate failed: ", cudaGetErrorString(err));
  return exec;
}

void capture_discard(void* stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // an invalidated capture leaves an error behind: it has been dealt with
  ENGINE_CHECK(err == cudaSuccess || err == cudaErrorStreamCaptureInvalidated,
               "cudaStreamEndCapture failed: ", cudaGetErrorString(err));
}

void graph_launch(void* exec, void* stream) {
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream)));
}

void graph_destroy(void* exec) { (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)); }
}  // namespace eng::cudart
