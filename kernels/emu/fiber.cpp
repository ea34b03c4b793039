// Fibers for the CUDA emulator: one per CUDA thread of a block, each on its
// own stack, all on the launching OS thread (runtime.h has the overview).
//
// Why ucontext: it is in glibc, needs no dependency, and gdb and the
// sanitizers understand it. A switch costs ~0.25 us (swapcontext also saves
// the signal mask), which is noise next to the kernels' work at the small
// shapes tests use (docs/emulator.md, "Performance").
//
// Stacks are mmap'd once and kept in a pool for the life of the process, so a
// launch costs no allocation once the pool is warm. Each stack has a
// PROT_NONE guard page below it: an overflow faults at once instead of
// corrupting the neighbouring fiber. Size: ENGINE_EMU_STACK_KB (default 128,
// 512 under AddressSanitizer, whose redzones make frames larger).
//
// ThreadSanitizer (the race check, race.h): every switch is announced with
// race::enter / race::leave, so each fiber is its own TSan thread.
//
// AddressSanitizer: every switch is announced with
// __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber, so ASan
// always knows which stack is live; without them it takes fiber frames for
// wild accesses, and an exception thrown in a fiber (which makes ASan
// unpoison "the current stack") would touch the wrong memory.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/emu/race.h"
#include "kernels/emu/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifndef EMU_ASAN
#define EMU_ASAN 0
#endif
#if EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu::detail {
namespace {

ucontext_t g_scheduler;  // the launching thread's context while a fiber runs
#if EMU_ASAN
// The scheduler's stack as ASan last reported it (it differs per launching thread).
const void* g_scheduler_stack = nullptr;
size_t g_scheduler_stack_bytes = 0;
#endif
std::vector<std::unique_ptr<Fiber>> g_pool;

size_t stack_bytes() {
  static const size_t bytes = [] {
    size_t kib = EMU_ASAN ? 512 : 128;
    if (const char* env = std::getenv("ENGINE_EMU_STACK_KB")) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (end == env || *end != '\0' || v < 16 || v > 1 << 20)
        fail(__FILE__, __LINE__, eng::cat("ENGINE_EMU_STACK_KB='", env, "': expected a size in KiB, 16 to 1048576"));
      kib = size_t(v);
    }
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return (kib * 1024 + page - 1) / page * page;
  }();
  return bytes;
}

}  // namespace

Fiber::~Fiber() {
  if (map) munmap(map, map_bytes);
}

Fiber& pooled_fiber(size_t i) {
  while (g_pool.size() <= i) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    auto f = std::make_unique<Fiber>();
    f->stack_bytes = stack_bytes();
    f->map_bytes = f->stack_bytes + page;
    void* m = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
      fail(__FILE__, __LINE__, eng::cat("cannot map a ", f->stack_bytes / 1024, " KiB fiber stack: ", strerror(errno)));
    f->map = static_cast<unsigned char*>(m);
    if (mprotect(f->map, page, PROT_NONE) != 0)
      fail(__FILE__, __LINE__, eng::cat("cannot protect a fiber stack's guard page: ", strerror(errno)));
    f->stack = f->map + page;
    race::fiber_created(*f);
    g_pool.push_back(std::move(f));
  }
  return *g_pool[i];
}

void prepare_fiber(Fiber& f, void (*entry)()) {
  if (getcontext(&f.ctx) != 0) fail(__FILE__, __LINE__, eng::cat("getcontext failed: ", strerror(errno)));
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = f.stack_bytes;
  f.ctx.uc_link = nullptr;  // entry() never returns: its last act is a final yield()
  makecontext(&f.ctx, entry, 0);
#if EMU_ASAN
  // Frames an earlier launch left on this stack are dead now.
  __asan_unpoison_memory_region(f.stack, f.stack_bytes);
  // libasan's swapcontext interceptor clears the shadow of the target's whole
  // uc_stack on every switch, which would erase the redzones of the fiber's
  // live frames (and cost a 64 KiB memset per switch). Only makecontext reads
  // uc_stack, so it is emptied once that has run; the annotations below tell
  // ASan everything it needs about the stacks.
  f.ctx.uc_stack.ss_sp = nullptr;
  f.ctx.uc_stack.ss_size = 0;
#endif
}

void resume(Fiber& f) {
  g_current = &f;
  g_thread_idx = f.tid;
  f.state = FiberState::running;
#if EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, f.stack, f.stack_bytes);
#endif
  race::enter(f);
  if (swapcontext(&g_scheduler, &f.ctx) != 0)
    fail(__FILE__, __LINE__, eng::cat("swapcontext failed: ", strerror(errno)));
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  g_current = nullptr;
}

void yield(Fiber& f, bool final_exit) {
#if EMU_ASAN
  // A null save slot tells ASan this fiber is gone for good (its fake stack is freed).
  __sanitizer_start_switch_fiber(final_exit ? nullptr : &f.asan_fake_stack, g_scheduler_stack, g_scheduler_stack_bytes);
#else
  (void)final_exit;
#endif
  race::leave();
  swapcontext(&f.ctx, &g_scheduler);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, &g_scheduler_stack, &g_scheduler_stack_bytes);
#endif
}

void fiber_started() {
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack, &g_scheduler_stack_bytes);
#endif
}

}  // namespace emu::detail
