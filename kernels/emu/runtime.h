// Internal state of the emulator, shared by its three parts:
//   fiber.cpp   stacks (reused, guard pages) and context switches (ucontext,
//               with AddressSanitizer fiber annotations);
//   launch.cpp  the launch: blocks one after another, one fiber per CUDA
//               thread, the counting block barrier, shared-memory poisoning,
//               error reporting;
//   warp.cpp    the per-warp rendezvous behind __shfl_*_sync, votes, __syncwarp,
//               and the .aligned exchange behind mma.sync and ldmatrix;
//   async.cpp   cp.async's per-thread queues of copies and groups;
//   schedule.cpp the order of blocks and threads (ENGINE_EMU_SCHEDULE);
//   race.cpp    the ThreadSanitizer race check's happens-before edges (race.h).
// Nothing outside kernels/emu includes this file.
//
// Conventions: every switch goes through the scheduler (the launching
// thread's own stack): resume() runs a fiber until it calls yield(). Errors
// found in a fiber are thrown there as eng::Error, caught at the bottom of the
// fiber and rethrown by launch() after every other fiber has been unwound.
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/emu/emu.h"

namespace emu::detail {

enum class FiberState : uint8_t {
  runnable,    // may run (not started yet, or released from a wait)
  running,     // the current fiber
  at_barrier,  // waits in __syncthreads*
  at_warp,     // waits in a warp collective for the other lanes
  done         // returned (or unwound) for this block
};

// One CUDA thread: a ucontext on a pooled stack, plus what it waits for.
struct Fiber {
  ucontext_t ctx;
  unsigned char* map = nullptr;  // mmap'd region: guard page, then the stack
  size_t map_bytes = 0;
  unsigned char* stack = nullptr;  // lowest usable stack address
  size_t stack_bytes = 0;
  void* asan_fake_stack = nullptr;  // AddressSanitizer's bookkeeping across a switch

  int linear = 0;  // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  uint3 tid{};
  FiberState state = FiberState::done;
  const char* file = nullptr;  // where it waits (barrier or warp collective)
  int line = 0;
  int predicate = 0;       // __syncthreads_count/and/or operand
  int barrier_result = 0;  // ... and the block-wide result
  WarpArgs warp{};         // the pending warp collective
  uint64_t warp_result = 0;
  void* tsan = nullptr;            // its ThreadSanitizer fiber (race check builds only, race.h)
  void* sync = nullptr;            // the race check's sync object of the barrier or rendezvous it waits in
  std::vector<AsyncCopy> cp_open;  // cp.async issued since the last commit_group
  std::vector<std::vector<AsyncCopy>> cp_groups;  // committed groups not yet waited for, oldest first

  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  ~Fiber();
};

// Thrown into a waiting fiber to unwind it (running its destructors) after
// another fiber failed. Deliberately not a std::exception: kernels have no
// business catching it.
struct Cancelled {};

struct Launch {
  LaunchSpec spec;
  void (*thunk)(void*) = nullptr;
  void* ctx = nullptr;
  std::vector<Fiber*> fibers;  // fibers[linear thread index] of the block running now
  std::vector<Fiber*> all;     // every fiber of the launch: race::kSets sets of nthreads (race.h)
  int nthreads = 0;
  uint3 block{};                                    // current block index
  int arrived = 0;                                  // threads waiting at the block barrier
  void* barrier_sync = nullptr;                     // the race check's sync object of the barrier being gathered
  int exited = 0;                                   // threads that returned in this block
  std::vector<std::vector<unsigned char>> staging;  // per warp: the blocks of its last warp_exchange
  bool cancelling = false;
  bool finished = false;
  std::exception_ptr error;
};

extern Launch* g_launch;  // the launch in progress, or null
extern Fiber* g_current;  // the running fiber, or null in the scheduler

// fiber.cpp
Fiber& pooled_fiber(size_t i);                  // the i-th stack of the pool, created on demand
void prepare_fiber(Fiber& f, void (*entry)());  // fresh context that starts at entry()
void resume(Fiber& f);                          // scheduler -> f, until f yields
void yield(Fiber& f, bool final_exit);          // f -> scheduler
void fiber_started();                           // first thing a new fiber does

// launch.cpp
Fiber& current_fiber(const char* what, const char* file, int line);  // or throws: "called outside a kernel"
void wait(Fiber& f);                           // yield until released; throws Cancelled when cancelled
std::string thread_name(const Fiber& f);       // "thread (x,y,z) of block (x,y,z)"
std::string site(const char* file, int line);  // "file:line"
[[noreturn]] void fail(const char* file, int line, const std::string& msg);

// warp.cpp
const char* warp_op_name(WarpOp op);
// Completes the collective that `waiter` waits in if every non-exited lane of
// its mask has arrived. Returns "" (completed or still waiting) or an error.
std::string try_complete_warp(Launch& L, Fiber& waiter);

}  // namespace emu::detail
