// Stream-ordered work and CUDA graphs, on the two GPU devices (cuda, emu).
//
// A CUDA graph records a whole sequence of launches once (stream capture) and
// replays it with one cudaGraphLaunch: a GPT-2 step is hundreds of small
// kernels whose launch overhead the replay removes (precision O3). Capture
// does not run anything, and a replay runs only what was recorded, so code
// inside a capture must not
//   - read device values on the host (a loss, a norm: item(), copy_bytes),
//   - prepare device inputs on the host (Tensor::full through a host buffer,
//     a table uploaded with copy_bytes),
// because that host work happens once, at capture, and never again. Such
// work is expressed in stream order instead, with the three calls below,
// which run now outside a capture and are recorded as graph nodes inside one
// (a captured upload's host half is the replay's, not a node: upload below).
// On emu the emulator records and replays the same way (kernels/emu/graph.h),
// so CI checks on CPUs that a captured step replays like an eager one.
//
// Memory: tensors allocated during a capture come from a private pool of the
// device's caching allocator (engine/device.h), so no tensor created outside
// the graph can be handed a block the replays write to.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "engine/device.h"

namespace emu {
struct Recording;
}

namespace eng {

// A capture is in progress on this thread (on any GPU device).
bool capturing();

// Stream-ordered copy between a GPU device and host staging memory (below)
// or within the device: cudaMemcpyAsync on the current stream; on emu a
// memcpy run in stream order.
void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);

// A copy within one device's memory in that device's order: memcpy on cpu
// (everything there is in order), copy_async on cuda and emu.
void copy_within(Device dev, void* dst, const void* src, size_t bytes);

// Host code run in stream order (cudaLaunchHostFunc; a host node in a graph):
// it may read and write host staging memory, never device memory, and must not
// call CUDA. It must not throw: an error there has nowhere to go (CUDA runs it
// on a driver thread); it terminates the process with its message.
// profile_name: its row in a step profile (engine/kernel_profile.h).
void host_task(Device dev, std::function<void()> fn, const char* profile_name = "host node");

// Host memory for copy_async (page-locked on cuda, so copies are truly async
// and capturable). Cached: released blocks are reused. That is safe because
// only stream-ordered work (copies, host tasks) touches them, in stream order,
// and a captured upload's block, which CudaGraph::replay() writes from the
// host, is the graph's until it is destroyed and is written only while no
// replay runs (replay() waits for the one it launches).
std::shared_ptr<void> host_staging(Device dev, size_t bytes);

// Stream-ordered upload of host bytes to `dst` on a GPU device: a host task
// copies *src into staging, then copy_async moves it. Captured, only the copy
// is a node: the graph keeps (src, staging) and replay() copies *src into
// staging before each launch (the replay before it has finished, so nothing
// reads staging then). Either way every replay uploads what *src holds at
// that replay: the owner may change the bytes (not the size) between
// replays, never during one. (A host node would stop the replay for a driver
// thread's callback each step.)
void upload(Device dev, std::shared_ptr<const std::vector<uint8_t>> src, void* dst);
// The step profile's name for an eager upload's host task: the step model
// (engine/gpu_model.cpp) leaves it out of a captured step, which has none.
inline constexpr const char* kUploadHostNode = "host node (upload; none captured)";

class CudaGraph {
 public:
  explicit CudaGraph(Device dev);  // cuda or emu
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Everything the engine launches on `dev` between these two calls is
  // recorded (nothing runs). Errors inside abort the capture cleanly.
  void capture_begin();
  void capture_end();
  void capture_abort() noexcept;  // after an exception between begin and end
  // Runs the recording once and waits for it to finish.
  void replay();
  Device device() const { return dev_; }

 private:
  friend void host_task(Device, std::function<void()>, const char*);
  friend void upload(Device, std::shared_ptr<const std::vector<uint8_t>>, void*);
  void leave_capture() noexcept;
  Device dev_;
  int pool_ = 0;
  void* stream_ = nullptr;       // cuda: the capture and replay stream
  void* prev_stream_ = nullptr;  // the current stream before capture_begin
  void* exec_ = nullptr;         // cuda: cudaGraphExec_t
  std::shared_ptr<emu::Recording> recording_;
  std::vector<std::unique_ptr<std::function<void()>>> host_fns_;  // cuda host nodes' closures
  struct Staged {  // a captured upload: *src copied into staging before each replay
    std::shared_ptr<const std::vector<uint8_t>> src;
    std::shared_ptr<void> staging;
  };
  std::vector<Staged> staged_;
  bool capturing_ = false;
};

}  // namespace eng
