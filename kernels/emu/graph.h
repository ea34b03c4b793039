// Stream capture in the emulator: what cudaStreamBeginCapture /
// cudaStreamEndCapture / cudaGraphLaunch do on a GPU, for the `emu` device.
// The emulator has one implicit stream and runs each piece of work when it is
// enqueued. Between capture_begin() and capture_end() nothing runs: kernel
// launches (LAUNCH_KERNEL), stream-ordered copies and host tasks are recorded
// with their arguments copied, exactly as CUDA records graph nodes, and
// replay() runs the recording again, in order, as often as asked.
// Why emulate it rather than say "graphs need a GPU": a captured training
// step must not depend on host work that only ran during capture (a value
// read back, a buffer filled on the host); replaying on emu and comparing
// with eager steps is how CI finds such a dependency without a GPU.
// One capture at a time in the process (the emulator serialises all work).
#pragma once
#include <functional>
#include <memory>
#include <vector>

namespace emu {

struct Recording {
  std::vector<std::function<void()>> work;  // in stream order
};

bool capturing();
void capture_begin();
std::shared_ptr<Recording> capture_end();
void replay(const Recording& r);

// Runs `work` now, or records it when capturing. Everything that touches
// emulated device memory in stream order goes through here.
void enqueue(std::function<void()> work);

}  // namespace emu
