// Kernel launches under the emulator: blocks run one after another on the
// launching OS thread, each CUDA thread of a block is a fiber, and the
// scheduler below runs every runnable fiber in turn until the block is done
// (docs/emulator.md walks through one launch).
//
// __syncthreads() is a counting barrier: each arriving thread records its
// call site; the last one to arrive releases the others, after checking that
// all of them wait at the same call site. A thread that returns while others
// wait (or arrives after one has returned), divergent call sites, and a block
// in which no fiber can run are reported as eng::Error naming the file:line
// of the barrier, the thread, and the launch.
//
// Shared memory is poisoned with 0xFF bytes (a NaN in every float type) at
// the start of each block: the dynamic buffer, and the thread-local block of
// the module holding the kernel, where `__shared__` puts static shared
// variables (emu.h says why). That TLS block is saved before the launch and
// restored after it, so the launching thread's other thread_locals (e.g.
// autograd's grad mode) are untouched; kernel code cannot legally read host
// thread_locals, so the poison in between harms nothing.
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#include "kernels/emu/race.h"
#include "kernels/emu/runtime.h"
#include "kernels/emu/schedule.h"

namespace emu::detail {

uint3 g_thread_idx{};
uint3 g_block_idx{};
dim3 g_block_dim;
dim3 g_grid_dim;
Launch* g_launch = nullptr;
Fiber* g_current = nullptr;

namespace {

// Serialises launches process-wide. g_owner is the OS thread inside a launch:
// a launch from inside a kernel (the same OS thread) gets a clear error
// instead of a self-deadlock (a recursive mutex would do that too, but the
// race check sees a fiber locking its launcher's mutex as a double lock).
std::mutex g_launch_mutex;
std::atomic<std::thread::id> g_owner{};

std::string xyz(unsigned x, unsigned y, unsigned z) { return eng::cat("(", x, ",", y, ",", z, ")"); }

// The kernel as written in LAUNCH_KERNEL: its text up to the first top-level comma.
std::string kernel_name(const char* what) {
  std::string s;
  int depth = 0;
  for (const char* p = what; *p && !(*p == ',' && depth == 0); ++p) {
    if (*p == '<' || *p == '(' || *p == '[') ++depth;
    if (*p == '>' || *p == ')' || *p == ']') --depth;
    s += *p;
  }
  return s;
}

std::string launch_context(const Launch& L, const Fiber* thrower) {
  const LaunchSpec& s = L.spec;
  return eng::cat(" [", thrower ? "raised in " + thread_name(*thrower) + "; " : "", "kernel ", kernel_name(s.what),
                  " launched at ", site(s.file, s.line), " with grid ", xyz(s.grid.x, s.grid.y, s.grid.z), ", block ",
                  xyz(s.block.x, s.block.y, s.block.z), "]");
}

// First error wins; eng::Errors get the launch (and the thread that threw)
// appended, other exception types (the kernel's own) are carried out unchanged.
void record_error(Launch& L, std::exception_ptr e, const Fiber* thrower) {
  if (L.error) return;
  try {
    std::rethrow_exception(e);
  } catch (const eng::Error& err) {
    L.error = std::make_exception_ptr(eng::Error(err.what() + launch_context(L, thrower)));
  } catch (...) {
    L.error = e;
  }
}
void record_error(Launch& L, const std::string& msg) {
  record_error(L, std::make_exception_ptr(eng::Error(msg)), nullptr);
}

// cudaFuncSetAttribute(MaxDynamicSharedMemorySize)'s look-alike: what each
// kernel (by address) was allowed; a GPU refuses a launch above 48 KiB without it.
constexpr size_t kDefaultDynamicSmem = 48 * 1024;
std::mutex g_smem_mutex;
std::map<std::uintptr_t, size_t>& smem_allowed() {
  static std::map<std::uintptr_t, size_t> m;
  return m;
}
size_t max_dynamic_smem(std::uintptr_t code) {
  const std::lock_guard<std::mutex> lock(g_smem_mutex);
  const auto it = smem_allowed().find(code);
  return it == smem_allowed().end() ? kDefaultDynamicSmem : it->second;
}

void validate(const LaunchSpec& s) {
  const std::string what =
      eng::cat("LAUNCH_KERNEL(", kernel_name(s.what), ") with grid ", xyz(s.grid.x, s.grid.y, s.grid.z), ", block ",
               xyz(s.block.x, s.block.y, s.block.z), ": ");
  const auto bad = [&](const std::string& why) { fail(s.file, s.line, what + why); };
  if (!s.grid.x || !s.grid.y || !s.grid.z || !s.block.x || !s.block.y || !s.block.z)
    bad("every dimension must be at least 1 (CUDA: invalid configuration argument)");
  if (s.block.x > 1024 || s.block.y > 1024 || s.block.z > 64 || uint64_t(s.block.x) * s.block.y * s.block.z > 1024)
    bad("a block holds at most 1024 threads, with z <= 64 (CUDA: invalid configuration argument)");
  if (s.grid.x > 2147483647u || s.grid.y > 65535 || s.grid.z > 65535)
    bad("grid limits are x < 2^31, y and z <= 65535 (CUDA: invalid configuration argument)");
  if (s.smem_bytes > 227 * 1024)
    bad(eng::cat(s.smem_bytes, " bytes of dynamic shared memory exceed the 227 KiB an sm_90 block can have"));
  if (s.smem_bytes > kDefaultDynamicSmem && max_dynamic_smem(s.code) < s.smem_bytes)
    bad(eng::cat(s.smem_bytes, " bytes of dynamic shared memory: over 48 KiB a kernel must first be allowed them, ",
                 "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) (allowed ",
                 max_dynamic_smem(s.code), "; CUDA: invalid argument)"));
}

// The TLS block of the module containing `code` on this thread.
struct TlsRange {
  std::uintptr_t code = 0;
  unsigned char* data = nullptr;
  size_t bytes = 0;
};
int find_module_tls(dl_phdr_info* info, size_t, void* arg) {
  auto* r = static_cast<TlsRange*>(arg);
  bool contains = false;
  const ElfW(Phdr)* tls = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && r->code >= lo && r->code < lo + ph.p_memsz) contains = true;
    if (ph.p_type == PT_TLS) tls = &ph;
  }
  if (!contains) return 0;
  if (tls && info->dlpi_tls_data) r->data = static_cast<unsigned char*>(info->dlpi_tls_data), r->bytes = tls->p_memsz;
  return 1;
}

// Static and dynamic shared memory of one launch (see the header comment).
class SharedMemory {
 public:
  explicit SharedMemory(const LaunchSpec& s) : dyn_bytes_(s.smem_bytes) {
    tls_.code = s.code;
    dl_iterate_phdr(find_module_tls, &tls_);
    const auto* e = reinterpret_cast<const unsigned char*>(&errno);
    if (tls_.data && e >= tls_.data && e < tls_.data + tls_.bytes) {
      // A fully static binary keeps libc's TLS (errno) in the same block:
      // poisoning it would break the C library, so static __shared__ stays unpoisoned.
      static bool noted = false;
      if (!noted) std::fprintf(stderr, "emulator: static binary, __shared__ variables are not poisoned\n");
      noted = true;
      poison_tls_ = false;
    }
    if (poison_tls_ && tls_.data) saved_.assign(tls_.data, tls_.data + tls_.bytes);
    // Exactly the requested size, so AddressSanitizer flags any access past it.
    dyn_ = static_cast<unsigned char*>(::operator new (std::max<size_t>(dyn_bytes_, 1), std::align_val_t{16}));
  }
  ~SharedMemory() {
    if (poison_tls_ && tls_.data) std::memcpy(tls_.data, saved_.data(), tls_.bytes);
    ::operator delete (dyn_, std::align_val_t{16});
  }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  // The next block's shared memory: poisoned, and (race check) with the last
  // block's accesses forgotten, since on a GPU it is other memory.
  void poison() {
    if (poison_tls_ && tls_.data)
      race::forget(tls_.data, tls_.bytes, race::Shared::static_tls), std::memset(tls_.data, 0xFF, tls_.bytes);
    race::forget(dyn_, dyn_bytes_, race::Shared::dynamic);
    std::memset(dyn_, 0xFF, dyn_bytes_);
  }
  unsigned char* dynamic() const { return dyn_; }

  // The shared-memory window (emu.h): static __shared__ (the module's TLS
  // block) at [0, tls bytes), the dynamic buffer from dyn_base() on.
  uint32_t dyn_base() const { return uint32_t((tls_.bytes + 1023) / 1024 * 1024); }
  bool to_window(const unsigned char* p, uint32_t& addr) const {
    if (tls_.data && p >= tls_.data && p < tls_.data + tls_.bytes) return addr = uint32_t(p - tls_.data), true;
    if (p >= dyn_ && p < dyn_ + dyn_bytes_) return addr = dyn_base() + uint32_t(p - dyn_), true;
    return false;
  }
  unsigned char* from_window(uint32_t addr, size_t bytes) const {
    if (tls_.data && addr < tls_.bytes && bytes <= tls_.bytes - addr) return tls_.data + addr;
    if (addr >= dyn_base() && addr - dyn_base() < dyn_bytes_ && bytes <= dyn_bytes_ - (addr - dyn_base()))
      return dyn_ + (addr - dyn_base());
    return nullptr;
  }
  std::string describe() const {
    return eng::cat("static __shared__ at [0, ", tls_.bytes, "), dynamic at [", dyn_base(), ", ",
                    dyn_base() + dyn_bytes_, ")");
  }

 private:
  TlsRange tls_;
  bool poison_tls_ = true;
  std::vector<unsigned char> saved_;
  size_t dyn_bytes_;
  unsigned char* dyn_;
};
SharedMemory* g_smem = nullptr;

// A thread returned: a barrier with waiters can never complete, and warp
// collectives waiting for this lane may now be complete (exited lanes do not
// take part, as in CUDA).
void thread_exited(Launch& L, Fiber& self) {
  self.state = FiberState::done;
  ++L.exited;
  if (L.arrived > 0) {
    const Fiber* w = *std::find_if(L.fibers.begin(), L.fibers.end(),
                                   [](const Fiber* f) { return f->state == FiberState::at_barrier; });
    record_error(L, eng::cat(site(w->file, w->line), ": __syncthreads() can never complete: ", thread_name(self),
                             " returned while ", L.arrived, " of the block's ", L.nthreads,
                             " threads wait here (first: ", thread_name(*w), ")"));
    return;
  }
  const int base = self.linear & ~31;
  for (int i = base; i < std::min(base + 32, L.nthreads); ++i) {
    if (L.fibers[i]->state != FiberState::at_warp) continue;
    const std::string err = try_complete_warp(L, *L.fibers[i]);
    if (!err.empty()) return record_error(L, err);
  }
}

void run_thread(Launch& L, Fiber& self) {
  try {
    L.thunk(L.ctx);
  } catch (const Cancelled&) {
    return;
  } catch (...) {
    record_error(L, std::current_exception(), &self);
    return;
  }
  thread_exited(L, self);
}

// Every fiber starts here, once per launch, and runs its thread once per block.
void fiber_main() {
  fiber_started();
  Fiber& self = *g_current;
  Launch& L = *g_launch;
  while (!L.finished) {
    if (!L.cancelling) {
      self.cp_open.clear();  // a thread's cp.async queue starts empty in every block
      self.cp_groups.clear();
      race::thread_begin();
      run_thread(L, self);
      race::thread_end();
    }
    self.state = FiberState::done;
    yield(self, false);
  }
  yield(self, true);
}

std::string deadlock_message(const Launch& L) {
  for (const Fiber* f : L.fibers) {
    if (f->state != FiberState::at_warp) continue;
    const int base = f->linear & ~31;
    for (int i = base; i < std::min(base + 32, L.nthreads); ++i) {
      const Fiber* g = L.fibers[i];
      if (!(f->warp.mask >> (i - base) & 1u) || g->state != FiberState::at_barrier) continue;
      return eng::cat(site(f->file, f->line), ": deadlock: ", thread_name(*f), " waits in ", warp_op_name(f->warp.op),
                      " for lane ", i - base, " (", thread_name(*g), "), which waits at __syncthreads() at ",
                      site(g->file, g->line));
    }
  }
  return eng::cat(site(L.spec.file, L.spec.line), ": deadlock in block ", xyz(L.block.x, L.block.y, L.block.z),
                  ": no thread can run");
}

// Runs one block, offering the runnable threads a turn in the schedule's
// order until all have returned; false when it failed (L.error is set).
bool run_block(Launch& L, Schedule& schedule) {
  g_block_idx = L.block;
  g_smem->poison();
  race::block_begin();
  if constexpr (race::enabled)
    for (Fiber* f : L.fibers)
      race::name_fiber(
          *f, eng::cat("thread ", xyz(f->tid.x, f->tid.y, f->tid.z), " of block ", xyz(L.block.x, L.block.y, L.block.z))
                  .c_str());
  L.arrived = L.exited = 0;
  for (Fiber* f : L.fibers) f->state = FiberState::runnable;
  for (;;) {
    bool ran = false;
    for (const int i : schedule.threads()) {
      Fiber* f = L.fibers[size_t(i)];
      if (f->state != FiberState::runnable) continue;
      resume(*f);
      ran = true;
      if (L.error) return false;
    }
    if (std::all_of(L.fibers.begin(), L.fibers.end(), [](const Fiber* f) { return f->state == FiberState::done; }))
      return true;
    if (!ran) {
      record_error(L, deadlock_message(L));
      return false;
    }
  }
}

// Unwinds every fiber still inside the kernel (their destructors run).
void cancel_block(Launch& L) {
  L.cancelling = true;
  for (Fiber* f : L.fibers)
    if (f->state != FiberState::done) resume(*f);
}

}  // namespace

std::string site(const char* file, int line) { return eng::cat(file, ":", line); }

std::string thread_name(const Fiber& f) {
  const Launch& L = *g_launch;
  return eng::cat("thread ", xyz(f.tid.x, f.tid.y, f.tid.z), " of block ", xyz(L.block.x, L.block.y, L.block.z));
}

void fail(const char* file, int line, const std::string& msg) {
  throw eng::Error(eng::cat(file, ":", line, ": ", msg));
}

Fiber& current_fiber(const char* what, const char* file, int line) {
  if (!g_current || !g_launch) fail(file, line, eng::cat(what, " called outside an emulated kernel"));
  return *g_current;
}

void wait(Fiber& f) {
  yield(f, false);
  if (g_launch->cancelling) throw Cancelled{};
}

}  // namespace emu::detail

const uint3& threadIdx = emu::detail::g_thread_idx;
const uint3& blockIdx = emu::detail::g_block_idx;
const dim3& blockDim = emu::detail::g_block_dim;
const dim3& gridDim = emu::detail::g_grid_dim;

namespace emu {

void set_max_dynamic_smem(std::uintptr_t kernel, size_t bytes) {
  const std::lock_guard<std::mutex> lock(detail::g_smem_mutex);
  detail::smem_allowed()[kernel] = bytes;
}
using namespace detail;

int barrier(BarrierOp op, int predicate, const char* file, int line) {
  Fiber& f = current_fiber("__syncthreads()", file, line);
  Launch& L = *g_launch;
  if (L.exited > 0) {
    const Fiber* d =
        *std::find_if(L.fibers.begin(), L.fibers.end(), [](const Fiber* g) { return g->state == FiberState::done; });
    fail(file, line,
         eng::cat("__syncthreads() can never complete: ", thread_name(*d),
                  " has already returned without reaching it (every thread of a block must)"));
  }
  f.state = FiberState::at_barrier;
  f.file = file;
  f.line = line;
  f.predicate = predicate != 0;
  if (L.arrived == 0) L.barrier_sync = race::new_sync();  // the first to arrive opens this barrier
  f.sync = L.barrier_sync;
  race::release(f.sync);
  if (++L.arrived < L.nthreads) {
    wait(f);
    race::acquire(f.sync);
    return f.barrier_result;
  }
  // The last thread arrived: all must wait at this very call site.
  L.arrived = 0;
  int count = 0;
  bool divergent = false;
  for (const Fiber* g : L.fibers) {
    count += g->predicate;
    divergent = divergent || g->line != line || std::strcmp(g->file, file) != 0;
  }
  if (divergent) {
    std::string sites;  // "N at file:line (first: thread ...)" per call site, in thread order
    for (const Fiber* g : L.fibers) {
      const auto same_site = [g](const Fiber* h) { return h->line == g->line && std::strcmp(h->file, g->file) == 0; };
      if (std::find_if(L.fibers.begin(), L.fibers.end(), same_site) != L.fibers.begin() + g->linear) continue;
      sites += eng::cat(sites.empty() ? "" : ", ", std::count_if(L.fibers.begin(), L.fibers.end(), same_site), " at ",
                        site(g->file, g->line), " (first: ", thread_name(*g), ")");
    }
    fail(file, line,
         eng::cat("divergent __syncthreads(): the threads of the block wait at different barriers: ", sites,
                  "; all threads of a block must reach the same __syncthreads()"));
  }
  const int result = op == BarrierOp::count ? count
                     : op == BarrierOp::all ? count == L.nthreads
                     : op == BarrierOp::any ? count > 0
                                            : 0;
  for (Fiber* g : L.fibers) g->barrier_result = result, g->state = FiberState::runnable;
  f.state = FiberState::running;
  race::acquire(f.sync);
  return result;
}

unsigned char* dynamic_smem(const char* file, int line) {
  current_fiber("DYNAMIC_SMEM", file, line);
  return g_smem->dynamic();
}

uint32_t shared_address(const void* p, const char* what, const char* file, int line) {
  Fiber& f = current_fiber(what, file, line);
  uint32_t addr = 0;
  if (!g_smem->to_window(static_cast<const unsigned char*>(p), addr))
    fail(file, line,
         eng::cat(what, " in ", thread_name(f), " (lane ", f.linear % 32, "): ", p,
                  " is not in the block's shared memory (", g_smem->describe(), ")"));
  return addr;
}

unsigned char* shared_pointer(uint32_t addr, size_t bytes, size_t align, const char* what, const char* file, int line) {
  Fiber& f = current_fiber(what, file, line);
  if (addr % align)
    fail(file, line,
         eng::cat(what, " in ", thread_name(f), " (lane ", f.linear % 32, "): shared address ", addr, " is not ", align,
                  "-byte aligned"));
  unsigned char* p = g_smem->from_window(addr, bytes);
  if (!p)
    fail(file, line,
         eng::cat(what, " in ", thread_name(f), " (lane ", f.linear % 32, "): shared address ", addr, " (", bytes,
                  " bytes) is outside the block's shared memory (", g_smem->describe(), ")"));
  return p;
}

void trap(const char* file, int line) {
  current_fiber("__trap()", file, line);
  fail(file, line, eng::cat("__trap() in ", thread_name(*g_current)));
}

namespace {
std::atomic<bool> g_count_only{[] {
  const char* env = std::getenv("ENGINE_EMU_COUNT_ONLY");
  return env && std::string(env) == "1";
}()};
}  // namespace
void set_count_only(bool on) { g_count_only = on; }
void count_launch() {
  if (detail::g_owner.load() != std::this_thread::get_id()) eng::kprof::count_launch();
}
bool count_only() { return g_count_only; }

void launch(const LaunchSpec& spec, void (*thunk)(void*), void* ctx) {
  if (g_owner.load() == std::this_thread::get_id())
    fail(spec.file, spec.line, "LAUNCH_KERNEL inside a running kernel (dynamic parallelism) is not emulated");
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  g_owner = std::this_thread::get_id();
  struct Owner {
    ~Owner() { g_owner = std::thread::id(); }
  } owner;
  validate(spec);
  if (count_only()) return;
  Launch L;
  L.spec = spec;
  L.thunk = thunk;
  L.ctx = ctx;
  L.nthreads = int(spec.block.x * spec.block.y * spec.block.z);
  const uint64_t nblocks = uint64_t(spec.grid.x) * spec.grid.y * spec.grid.z;
  // One set of fibers, or under the race check one per block position modulo
  // race::kSets, so consecutive blocks are different TSan threads (race.h).
  const int sets = int(std::min<uint64_t>(race::kSets, nblocks));
  for (int i = 0; i < sets * L.nthreads; ++i) {
    Fiber& f = pooled_fiber(size_t(i));
    prepare_fiber(f, fiber_main);
    const unsigned t = unsigned(i % L.nthreads);
    f.linear = int(t);
    f.tid = uint3{t % spec.block.x, t / spec.block.x % spec.block.y, t / (spec.block.x * spec.block.y)};
    L.all.push_back(&f);
  }
  Schedule schedule(nblocks, L.nthreads);
  SharedMemory smem(spec);
  g_launch = &L;
  g_smem = &smem;
  g_block_dim = spec.block;
  g_grid_dim = spec.grid;
  struct Reset {
    ~Reset() { g_launch = nullptr, g_smem = nullptr; }
  } reset;

  for (uint64_t k = 0; k < nblocks && !L.error; ++k) {
    const uint64_t b = schedule.block(k);
    L.block = uint3{unsigned(b % spec.grid.x), unsigned(b / spec.grid.x % spec.grid.y),
                    unsigned(b / (uint64_t(spec.grid.x) * spec.grid.y))};
    const auto set = L.all.begin() + ptrdiff_t(k % uint64_t(sets)) * L.nthreads;
    L.fibers.assign(set, set + L.nthreads);
    if (!run_block(L, schedule)) cancel_block(L);
    race::block_end();
  }
  L.finished = true;  // let every fiber leave its loop, so its stack is free for the next launch
  for (Fiber* f : L.all) resume(*f);
  race::launch_end();
  if (L.error) std::rethrow_exception(L.error);
}

}  // namespace emu
