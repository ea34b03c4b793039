// cp.async under the emulator: each CUDA thread's queue of asynchronous
// copies (emu.h). On the GPU a copy lands at some moment between its issue
// and the cp.async.wait_group that covers it; here it lands at that wait,
// the latest moment, and the caller (tensor_core.h) poisons the destination
// at issue, the earliest, and again at every wait that leaves it pending (an
// older copy landing there at that wait must not stand in for the pending
// one: a kernel that prefetches into the buffer it is about to read would
// pass). So a kernel that reads the destination before its
// wait reads 0xFF bytes (a NaN), and, under the race check, another thread
// reading it without the issuing thread's wait and a barrier in between is a
// race with the write at the wait: a missing wait fails instead of passing by
// luck. The copies themselves are performed by the caller, in the kernel's
// own (instrumented) code, so the race check sees them as the issuing
// thread's accesses.
#include "kernels/emu/runtime.h"

namespace emu {
using namespace detail;

void cp_async_issue(const AsyncCopy& copy, const char* file, int line) {
  current_fiber("cp.async", file, line).cp_open.push_back(copy);
}

void cp_async_commit(const char* file, int line) {
  Fiber& f = current_fiber("cp.async.commit_group", file, line);
  f.cp_groups.push_back(std::move(f.cp_open));  // an empty group is a group too, as in the PTX ISA
  f.cp_open.clear();
}

std::vector<AsyncCopy> cp_async_pending(const char* file, int line) {
  const Fiber& f = current_fiber("cp.async.wait_group", file, line);
  std::vector<AsyncCopy> pending = f.cp_open;
  for (const std::vector<AsyncCopy>& g : f.cp_groups) pending.insert(pending.end(), g.begin(), g.end());
  return pending;
}

std::vector<AsyncCopy> cp_async_wait(int newest_pending, const char* file, int line) {
  Fiber& f = current_fiber("cp.async.wait_group", file, line);
  if (newest_pending < 0) fail(file, line, eng::cat("cp.async.wait_group ", newest_pending, ": N must be >= 0"));
  std::vector<AsyncCopy> done;
  while (f.cp_groups.size() > size_t(newest_pending)) {
    done.insert(done.end(), f.cp_groups.front().begin(), f.cp_groups.front().end());
    f.cp_groups.erase(f.cp_groups.begin());
  }
  return done;
}

}  // namespace emu
