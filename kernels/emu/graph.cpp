// Stream capture and replay for the emulator (see graph.h).
#include "kernels/emu/graph.h"

#include "base/error.h"

namespace emu {

namespace {
// Non-null while a capture is in progress. A plain global, not a
// thread_local: LAUNCH_KERNEL asks capturing() even when called (wrongly)
// from inside a kernel, where the module's thread-local block holds the
// shared-memory poison (launch.cpp). The emulator serialises all work anyway.
std::shared_ptr<Recording> t_capture;
}  // namespace

bool capturing() { return t_capture != nullptr; }

void capture_begin() {
  ENGINE_CHECK(!t_capture, "emu: capture_begin while a capture is already in progress (captures do not nest)");
  t_capture = std::make_shared<Recording>();
}

std::shared_ptr<Recording> capture_end() {
  ENGINE_CHECK(t_capture, "emu: capture_end without capture_begin");
  std::shared_ptr<Recording> r = std::move(t_capture);
  t_capture = nullptr;
  return r;
}

void replay(const Recording& r) {
  ENGINE_CHECK(!t_capture, "emu: a graph replay while capturing (not supported, as on CUDA without child graphs)");
  for (const auto& w : r.work) w();
}

void enqueue(std::function<void()> work) {
  if (t_capture)
    t_capture->work.push_back(std::move(work));
  else
    work();
}

}  // namespace emu
