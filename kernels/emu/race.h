// The emulator's race check (docs/emulator.md, "Race check"): in the
// ThreadSanitizer build (-DENGINE_SANITIZE=thread, which defines
// ENGINE_EMU_RACECHECK), every emulated CUDA thread is a TSan fiber and the
// CUDA synchronisation points become TSan's happens-before edges, so an
// unsynchronised pair of accesses by two GPU threads is reported with both
// kernel source lines. In every other build these hooks are empty inlines.
//
// The edges, as on a GPU:
//   launch      the host's work before a launch happens before every thread
//               of it (the host releases `start` at each block start, every
//               thread acquires it when it begins);
//   completion  every thread happens before the host's work after the launch
//               (each thread releases `end` when it returns, the host
//               acquires it when the launch is over);
//   barrier     __syncthreads*: every thread of the block releases a sync
//               object fresh for that barrier instance, then acquires it;
//   warp        a _sync collective: the same over the lanes of one
//               rendezvous (a fresh object per rendezvous, so lanes outside
//               the mask gain nothing);
//   atomics     the kernels' __atomic builtins are instrumented by TSan itself.
// Fiber switches are announced with __tsan_switch_to_fiber_no_sync: running
// one thread after another on one OS thread is not a synchronisation.
//
// Blocks: consecutive blocks of the schedule use different TSan fibers (one
// set of fibers per block position modulo kSets), so two blocks racing on
// global memory are seen unless they run a multiple of kSets apart; the
// random schedule varies which blocks meet. Shared memory is reused by the
// next block at the same addresses, so its access history is forgotten at
// each block start (forget()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace emu::detail {
struct Fiber;
}  // namespace emu::detail

namespace emu::detail::race {

enum class Shared : uint8_t { static_tls, dynamic };  // which shared memory forget() resets

#if defined(ENGINE_EMU_RACECHECK)
inline constexpr bool enabled = true;
inline constexpr int kSets = 2;

void fiber_created(Fiber& f);                           // its TSan fiber
void name_fiber(Fiber& f, const char* name);            // shown in reports ("thread (x,y,z) of block (x,y,z)")
void enter(Fiber& f);                                   // the scheduler switches to f
void leave();                                           // the running fiber switches back to the scheduler
void forget(const void* p, size_t bytes, Shared kind);  // drop the access history of reused memory
void block_begin();                                     // host: fresh sync objects, release `start`
void block_end();                                       // host: free the block's sync objects
void thread_begin();                                    // fiber: acquire `start`
void thread_end();                                      // fiber: release `end`
void launch_end();                                      // host: acquire `end`
void* new_sync();                                       // a sync object fresh for one barrier or rendezvous
void release(void* sync);
void acquire(void* sync);
void unseen_copy(void* dst, const void* src, size_t n);  // a memcpy the race check does not record
// While one lives, the running fiber's accesses and allocations are not
// recorded: the emulator's own bookkeeping done on a GPU thread's behalf.
struct Unseen {
  Unseen();
  ~Unseen();
  Unseen(const Unseen&) = delete;
  Unseen& operator=(const Unseen&) = delete;
};
#else
inline constexpr bool enabled = false;
inline constexpr int kSets = 1;

inline void fiber_created(Fiber&) {}
inline void name_fiber(Fiber&, const char*) {}
inline void enter(Fiber&) {}
inline void leave() {}
inline void forget(const void*, size_t, Shared) {}
inline void block_begin() {}
inline void block_end() {}
inline void thread_begin() {}
inline void thread_end() {}
inline void launch_end() {}
inline void* new_sync() { return nullptr; }
inline void release(void*) {}
inline void acquire(void*) {}
inline void unseen_copy(void* dst, const void* src, size_t n) { __builtin_memcpy(dst, src, n); }
struct Unseen {};
#endif

}  // namespace emu::detail::race
