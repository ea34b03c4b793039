// CopyStream: cuda streams and events; in-order no-ops on emu and cpu.
#include "engine/copy_stream.h"

#include <cstring>

#include "base/error.h"
#include "engine/cuda_runtime.h"
#include "engine/graph.h"
#include "kernels/cuda/gpu_ops.h"

namespace eng {

CopyStream::CopyStream(Device dev, int slots) : dev_(dev) {
  ENGINE_CHECK(slots > 0, "CopyStream: needs at least one event slot");
  if (dev.type != DeviceType::cuda) return;
  stream_ = cudart::stream_create(dev.index);
  try {
    compute_mark_ = cudart::event_create();
    for (int i = 0; i < slots; ++i) events_.push_back(cudart::event_create());
  } catch (...) {
    for (void* e : events_) cudart::event_destroy(e);
    if (compute_mark_) cudart::event_destroy(compute_mark_);
    cudart::stream_destroy(stream_);
    throw;
  }
}

CopyStream::~CopyStream() {
  if (dev_.type != DeviceType::cuda) return;
  try {
    cudart::stream_synchronize(stream_);  // no copy may outlive the buffers it reads
  } catch (...) {
  }
  for (void* e : events_) cudart::event_destroy(e);
  cudart::event_destroy(compute_mark_);
  cudart::stream_destroy(stream_);
}

void CopyStream::wait_compute() {
  if (dev_.type != DeviceType::cuda) return;
  cudart::event_record_on(compute_mark_, gpu::current_stream());
  cudart::stream_wait_event(stream_, compute_mark_);
}

void CopyStream::upload(void* d_dst, const void* h_src, size_t bytes) {
  switch (dev_.type) {
    case DeviceType::cuda:
      return cudart::memcpy_async(d_dst, true, h_src, false, bytes, stream_);
    case DeviceType::emu:
      return copy_async(d_dst, dev_, h_src, kCPU, bytes);  // in the emulator's stream order
    case DeviceType::cpu:
      std::memcpy(d_dst, h_src, bytes);
      return;
  }
}

void CopyStream::record(int slot) {
  if (dev_.type == DeviceType::cuda) cudart::event_record_on(events_.at(size_t(slot)), stream_);
}

void CopyStream::compute_wait(int slot) {
  if (dev_.type == DeviceType::cuda) cudart::stream_wait_event(gpu::current_stream(), events_.at(size_t(slot)));
}

bool CopyStream::done(int slot) const {
  return dev_.type != DeviceType::cuda || cudart::event_query(events_.at(size_t(slot)));
}

void CopyStream::synchronize(int slot) const {
  if (dev_.type == DeviceType::cuda) cudart::event_synchronize(events_.at(size_t(slot)));
}

void CopyStream::synchronize() const {
  if (dev_.type == DeviceType::cuda) cudart::stream_synchronize(stream_);
}

}  // namespace eng
