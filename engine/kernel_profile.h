// A step's GPU work, kernel by kernel: what `train --kernel_profile STEP`
// prints (docs/profiling.md). While a KernelProfile listens (start .. stop,
// on the host thread that launches), every launcher call through
// ENGINE_GPU_CALL, every GEMM of matmul (cuBLASLt on cuda), cuDNN's
// attention, stream-ordered copies and host nodes become one KernelCall with
// the cost its formula gives (kernels/kernel_cost.h) and the raw launches it
// made. On the cuda device each call is also timed: a CUDA event before and
// after it on the launching stream, read at stop() (an eager step only:
// events cannot be recorded into a graph being captured). On emu and cpu
// there is no time; engine/gpu_model.h models one for a named GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/kernel_cost.h"

namespace eng {

struct KernelCall {
  std::string name;
  kprof::Cost cost;
  int64_t launches = 0;
  double ms = -1;  // measured on cuda; -1: not measured
};

class KernelProfile final : public kprof::Sink {
 public:
  explicit KernelProfile(Device dev);
  ~KernelProfile() override;
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;

  // Listen on this thread from now; stop() waits for the device (cuda),
  // reads the times and stops listening.
  void start();
  void stop();
  const std::vector<KernelCall>& calls() const { return calls_; }

  void begin(const char* name, const kprof::Cost& cost) override;
  void end() override;
  void launch() override;

 private:
  void* event();  // from the pool (cuda)

  Device dev_;
  bool listening_ = false;
  int depth_ = 0;  // nested scopes belong to the outermost
  std::vector<KernelCall> calls_;
  std::vector<void*> events_;  // cuda: start and stop of each call, in order
  size_t used_ = 0;
};

// The name a launch outside any launcher's scope is counted under (a raw
// LAUNCH_KERNEL of code that bypasses ENGINE_GPU_CALL): such launches are
// kept, not dropped, so the launch total is every launch.
inline constexpr const char* kUnattributed = "(launch outside a launcher)";

}  // namespace eng
