// The race check's TSan calls (race.h has the model). This file, like the
// rest of the emulator runtime, is compiled without TSan instrumentation even
// in the TSan build: the emulator's own bookkeeping (who waits where) is
// shared by all fibers on purpose and is not kernel memory.
#include "kernels/emu/race.h"

#if defined(ENGINE_EMU_RACECHECK)
#include <sanitizer/tsan_interface.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "kernels/emu/runtime.h"

// Exported by GCC 12's libtsan, not declared in its headers: the per-thread
// switch that stops recording accesses (and allocations) while set, and the
// allocation callbacks of TSan's Java interface. Those are the runtime's only
// exported way to reset the access history of a range (a fresh allocation is
// new memory); AnnotateNewMemory, the annotation meant for it, does nothing in
// this runtime. They need 8-byte granules and no Java heap in release builds.
extern "C" {
void __tsan_ignore_thread_begin();
void __tsan_ignore_thread_end();
void __tsan_java_alloc(uintptr_t ptr, uintptr_t size);
void __tsan_java_free(uintptr_t ptr, uintptr_t size);
}

namespace emu::detail::race {
namespace {

void* g_host = nullptr;  // TSan's context of the launching OS thread while a fiber runs
char g_start, g_end;     // the launch and completion sync objects (their addresses; never read or written)

// Sync objects live one byte each in heap chunks freed at the end of every
// block: freeing memory destroys TSan's sync objects in it, so a barrier of the
// next block starts with an empty clock. The chunks are emulator memory, so
// TSan ignores their allocation and release (otherwise a chunk allocated in
// one fiber and freed by the scheduler would itself look like a race).
constexpr size_t kChunk = 4096;
std::vector<char*> g_chunks;
size_t g_used = kChunk;

struct Ignored {
  Ignored() { __tsan_ignore_thread_begin(); }
  ~Ignored() { __tsan_ignore_thread_end(); }
  Ignored(const Ignored&) = delete;
  Ignored& operator=(const Ignored&) = delete;
};

}  // namespace

// Fibers are pooled for the life of the process, and so are their TSan
// contexts (creating one costs ~1 ms: TSan maps its trace and shadow stack).
void fiber_created(Fiber& f) { f.tsan = __tsan_create_fiber(0); }

void name_fiber(Fiber& f, const char* name) { __tsan_set_fiber_name(f.tsan, name); }

void enter(Fiber& f) {
  g_host = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(f.tsan, __tsan_switch_to_fiber_no_sync);
}

void leave() { __tsan_switch_to_fiber(g_host, __tsan_switch_to_fiber_no_sync); }

// Allocating resets the range's history and makes it a heap block (reports
// then show the block "allocated" in __tsan_java_alloc: the dynamic shared
// memory). Static shared memory is freed again, so reports keep calling it
// "TLS of main thread"; its granules may hold host thread_locals too, which
// lose their history as well: that can only hide a race on them, not invent one.
void forget(const void* p, size_t bytes, Shared kind) {
  if (!bytes) return;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(7);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes + 7) & ~uintptr_t(7);
  __tsan_java_free(lo, hi - lo);  // the previous block (and any sync objects in the range)
  __tsan_java_alloc(lo, hi - lo);
  if (kind == Shared::static_tls) __tsan_java_free(lo, hi - lo);
}

void block_begin() { __tsan_release(&g_start); }

void block_end() {
  Ignored ignored;
  for (char* c : g_chunks) std::free(c);
  g_chunks.clear();
  g_used = kChunk;
}

void thread_begin() { __tsan_acquire(&g_start); }
void thread_end() { __tsan_release(&g_end); }
void launch_end() { __tsan_acquire(&g_end); }

void* new_sync() {
  if (g_used == kChunk) {
    Ignored ignored;
    g_chunks.push_back(static_cast<char*>(std::malloc(kChunk)));
    if (!g_chunks.back()) throw std::bad_alloc();
    g_used = 0;
  }
  return g_chunks.back() + g_used++;
}

void release(void* sync) { __tsan_release(sync); }
// The exchange's gathering of the lanes' registers (warp.cpp): the
// emulator's work, not a GPU thread's access (TSan's memcpy interceptor would
// otherwise record it as the completing lane's).
void unseen_copy(void* dst, const void* src, size_t n) {
  Ignored ignored;
  std::memcpy(dst, src, n);
}
Unseen::Unseen() { __tsan_ignore_thread_begin(); }
Unseen::~Unseen() { __tsan_ignore_thread_end(); }
void acquire(void* sync) { __tsan_acquire(sync); }

}  // namespace emu::detail::race
#endif
