// Recording a step's kernels (engine/kernel_profile.h).
#include "engine/kernel_profile.h"

#include "base/error.h"
#include "engine/cuda_runtime.h"
#include "engine/graph.h"
#include "kernels/cuda/gpu_ops.h"

namespace eng {

KernelProfile::KernelProfile(Device dev) : dev_(dev) {}

KernelProfile::~KernelProfile() {
  if (listening_ && kprof::t_sink == this) kprof::t_sink = nullptr;
  for (void* e : events_) cudart::event_destroy(e);
}

void KernelProfile::start() {
  ENGINE_CHECK(!kprof::t_sink, "KernelProfile: another profile already listens on this thread");
  calls_.clear();
  used_ = 0;
  depth_ = 0;
  kprof::t_sink = this;
  listening_ = true;
}

void KernelProfile::stop() {
  if (!listening_) return;
  kprof::t_sink = nullptr;
  listening_ = false;
  ENGINE_CHECK(depth_ == 0, "KernelProfile: stopped inside a launcher's scope");
  if (dev_.type != DeviceType::cuda || used_ == 0) return;
  cudart::event_synchronize(events_[used_ - 1]);
  for (size_t i = 0; i < calls_.size(); ++i)
    calls_[i].ms = cudart::event_elapsed_ms(events_[2 * i], events_[2 * i + 1]);
}

void* KernelProfile::event() {
  if (used_ == events_.size()) events_.push_back(cudart::event_create());
  return events_[used_++];
}

void KernelProfile::begin(const char* name, const kprof::Cost& cost) {
  if (depth_++ > 0) return;
  // Events recorded into a capture are graph nodes whose times cannot be
  // read: a profiled step is eager (GpuTrainStep::set_eager_steps).
  ENGINE_CHECK(dev_.type != DeviceType::cuda || !capturing(), "KernelProfile: '", name,
               "' launched during a CUDA graph capture; profile an eager step");
  calls_.push_back({name, cost, 0, -1});
  if (dev_.type == DeviceType::cuda) cudart::event_record_on(event(), gpu::current_stream());
}

void KernelProfile::end() {
  if (--depth_ > 0) return;
  if (dev_.type == DeviceType::cuda) cudart::event_record_on(event(), gpu::current_stream());
}

void KernelProfile::launch() {
  if (depth_ > 0) {
    ++calls_.back().launches;
    return;
  }
  // Outside every scope: a call of its own, so the times stay paired.
  begin(kUnattributed, kprof::Cost{});
  ++calls_.back().launches;
  end();
}

}  // namespace eng
