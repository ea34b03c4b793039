// Stream-ordered work and CUDA graphs on cuda and emu (see graph.h).
#include "engine/graph.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "engine/cuda_runtime.h"
#include "kernels/cuda/gpu_ops.h"
#include "kernels/emu/graph.h"

namespace eng {

namespace {
thread_local CudaGraph* t_capturing = nullptr;  // the graph this thread is capturing into

void check_gpu(Device dev, const char* what) {
  ENGINE_CHECK(dev.type != DeviceType::cpu, what, ": needs a GPU device (cuda or emu), got ", dev.str());
}

// cudaLaunchHostFunc takes a C function: these call the closure behind `data`.
void run_host_fn(void* data) noexcept {
  try {
    (*static_cast<std::function<void()>*>(data))();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fatal: host task failed: %s\n", e.what());
    std::abort();
  }
}
void run_and_delete_host_fn(void* data) noexcept {
  run_host_fn(data);
  delete static_cast<std::function<void()>*>(data);
}
}  // namespace

bool capturing() { return t_capturing != nullptr; }

void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  const Device dev = dst_dev.type != DeviceType::cpu ? dst_dev : src_dev;
  check_gpu(dev, "copy_async");
  // A step profile's row: a copy within the device moves its bytes twice
  // (read and write); one to or from the host crosses the bus once.
  const bool within = dst_dev.type != DeviceType::cpu && src_dev.type != DeviceType::cpu;
  const kprof::Scope profiled(within                            ? "memcpy device to device"
                              : dst_dev.type == DeviceType::cpu ? "memcpy device to host"
                                                                : "memcpy host to device",
                              kprof::memory(double(bytes) * (within ? 2 : 1)));
  kprof::count_launch();
  if (dev.type == DeviceType::cuda) {
    cudart::memcpy_async(dst, dst_dev.type == DeviceType::cuda, src, src_dev.type == DeviceType::cuda, bytes,
                         gpu::current_stream());
    return;
  }
  emu::enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

void copy_within(Device dev, void* dst, const void* src, size_t bytes) {
  if (dev.type == DeviceType::cpu)
    std::memcpy(dst, src, bytes);
  else
    copy_async(dst, dev, src, dev, bytes);
}

void host_task(Device dev, std::function<void()> fn, const char* profile_name) {
  check_gpu(dev, "host_task");
  kprof::Cost host;
  host.kind = kprof::Kind::host;
  const kprof::Scope profiled(profile_name, host);
  kprof::count_launch();
  if (dev.type == DeviceType::emu) {
    emu::enqueue(std::move(fn));
    return;
  }
  if (t_capturing) {  // the node's closure lives as long as the graph
    t_capturing->host_fns_.push_back(std::make_unique<std::function<void()>>(std::move(fn)));
    cudart::launch_host_func(gpu::current_stream(), run_host_fn, t_capturing->host_fns_.back().get());
    return;
  }
  cudart::launch_host_func(gpu::current_stream(), run_and_delete_host_fn, new std::function<void()>(std::move(fn)));
}

std::shared_ptr<void> host_staging(Device dev, size_t bytes) {
  check_gpu(dev, "host_staging");
  CachingAllocator& a = dev.type == DeviceType::cuda ? pinned_host_allocator() : allocator_for(kCPU);
  // The deleter may run in a host task (a CUDA driver thread): release()
  // only returns the block to the allocator's cache, no CUDA call.
  return std::shared_ptr<void>(a.allocate(bytes), [&a, bytes](void* p) { a.release(p, bytes); });
}

void upload(Device dev, std::shared_ptr<const std::vector<uint8_t>> src, void* dst) {
  const size_t bytes = src->size();
  if (bytes == 0) return;
  check_gpu(dev, "upload");
  std::shared_ptr<void> staging = host_staging(dev, bytes);
  void* const from = staging.get();
  if (t_capturing)
    t_capturing->staged_.push_back({std::move(src), std::move(staging)});  // replay() fills it
  else
    host_task(
        dev, [src, staging] { std::memcpy(staging.get(), src->data(), src->size()); }, kUploadHostNode);
  copy_async(dst, dev, from, kCPU, bytes);
}

CudaGraph::CudaGraph(Device dev) : dev_(dev) {
  check_gpu(dev, "CudaGraph");
  if (dev.type == DeviceType::cuda) stream_ = cudart::stream_create(dev.index);
}

CudaGraph::~CudaGraph() {
  if (capturing_) capture_abort();
  if (exec_) cudart::graph_destroy(exec_);
  if (stream_) cudart::stream_destroy(stream_);
  if (pool_) allocator_for(dev_).close_pool(pool_);
}

void CudaGraph::capture_begin() {
  ENGINE_CHECK(!t_capturing, "CudaGraph: a capture is already in progress on this thread");
  ENGINE_CHECK(!exec_ && !recording_, "CudaGraph: already captured (make a new graph to capture again)");
  // Begin first: if that fails, nothing (stream, pool) has been switched yet.
  if (dev_.type == DeviceType::cuda) {
    cudart::stream_synchronize(nullptr);  // eager work before the capture is done
    cudart::capture_begin(stream_);
    prev_stream_ = gpu::t_current_stream;
    gpu::t_current_stream = stream_;
  } else {
    emu::capture_begin();
  }
  pool_ = allocator_for(dev_).begin_pool();
  t_capturing = this;
  capturing_ = true;
}

// Back to eager: the current stream, the shared allocator cache, no capture.
void CudaGraph::leave_capture() noexcept {
  t_capturing = nullptr;
  capturing_ = false;
  allocator_for(dev_).end_pool();
  if (dev_.type == DeviceType::cuda) gpu::t_current_stream = prev_stream_;
}

void CudaGraph::capture_end() {
  ENGINE_CHECK(capturing_ && t_capturing == this, "CudaGraph: capture_end without capture_begin");
  leave_capture();
  if (dev_.type == DeviceType::cuda)
    exec_ = cudart::capture_end(stream_);  // throws if the capture or the instantiation failed
  else
    recording_ = emu::capture_end();
}

void CudaGraph::capture_abort() noexcept {
  if (!capturing_) return;
  leave_capture();
  staged_.clear();
  try {
    if (dev_.type == DeviceType::cuda)
      cudart::capture_discard(stream_);
    else
      (void)emu::capture_end();
  } catch (...) {  // the capture was already invalidated by the error being handled
  }
}

void CudaGraph::replay() {
  ENGINE_CHECK(!t_capturing, "CudaGraph: replay during a capture");
  ENGINE_CHECK(exec_ || recording_, "CudaGraph: replay before capture_end");
  // The captured uploads' bytes as they are now; the last replay has finished.
  for (const Staged& s : staged_) std::memcpy(s.staging.get(), s.src->data(), s.src->size());
  if (dev_.type == DeviceType::cuda) {
    cudart::stream_synchronize(nullptr);  // eager work (inputs just uploaded) first: stream_ is non-blocking
    cudart::graph_launch(exec_, stream_);
    cudart::stream_synchronize(stream_);
  } else {
    emu::replay(*recording_);
  }
}

}  // namespace eng
