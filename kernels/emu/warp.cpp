// Warp collectives under the emulator: __shfl_*_sync, __ballot_sync,
// __any_sync, __all_sync and __syncwarp, and the .aligned exchange that
// mma.sync and ldmatrix are built on (tensor_core.h).
//
// A collective is a rendezvous of the lanes named in its mask, within one
// warp only (a block-wide barrier would deadlock the common
// `if (warp == 0) warp_reduce(); __syncthreads();`). Each arriving lane posts
// its operand and waits; the lane that completes the set computes every
// lane's result and releases the others. As the CUDA programming guide
// specifies, the non-exited lanes named in the mask must all call the same
// collective with the same mask (from any call site, as on sm_70+); lanes
// that have exited, or that do not exist in a partial last warp, simply do
// not take part. What is reported, with file:line:
//   - a lane whose mask does not include itself;
//   - lanes of one mask waiting in different collectives (op, mask, shuffle
//     width or operand size differ);
//   - a lane of the mask waiting at __syncthreads() (a deadlock on the GPU).
//
// Shuffle results follow the PTX ISA's shfl.sync pseudo-code exactly (see
// source_lane): CUDA passes c = ((32 - width) << 8) | clamp, where clamp is
// 0 for .up and 31 otherwise, and the hardware uses b[4:0] of the lane
// argument. Reading a lane that takes no part yields poison bytes (0xFF...),
// where the GPU returns an undefined value.
//
// The exchange is stricter, as .sync.aligned instructions are: every lane of
// the warp must take part (a partial warp, or a lane that has exited, is an
// error, not a smaller set), and all at the same call site with the same
// variant: lanes that reach one mma.sync from two branches are divergent.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/emu/race.h"
#include "kernels/emu/runtime.h"

namespace emu::detail {
namespace {

constexpr int kMaxExchangeBytes = 64;  // per lane: mma.sync posts 24, ldmatrix 16

bool is_shuffle(WarpOp op) {
  return op == WarpOp::shfl_idx || op == WarpOp::shfl_up || op == WarpOp::shfl_down || op == WarpOp::shfl_xor;
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string describe(const WarpArgs& a) {
  if (a.op == WarpOp::exchange) return eng::cat(a.what, " at ", site(a.file, a.line));
  if (!is_shuffle(a.op)) return eng::cat(warp_op_name(a.op), "(mask ", hex(a.mask), ")");
  return eng::cat(warp_op_name(a.op), "(mask ", hex(a.mask), ", width ", a.width, ", ", a.size, "-byte value)");
}

bool same_collective(const WarpArgs& a, const WarpArgs& b) {
  const bool same = a.op == b.op && a.mask == b.mask && a.width == b.width && a.size == b.size;
  if (!same || a.op != WarpOp::exchange) return same;
  return a.arg == b.arg && a.line == b.line && std::strcmp(a.file, b.file) == 0;  // .aligned: one instruction
}

// The lane a shuffle reads, per the PTX ISA's shfl.sync description.
uint32_t source_lane(WarpOp op, uint32_t lane, uint32_t b, int width) {
  const uint32_t c = (uint32_t(32 - width) << 8) | (op == WarpOp::shfl_up ? 0u : 0x1fu);
  const uint32_t bval = b & 0x1f, cval = c & 0x1f, segmask = (c >> 8) & 0x1f;
  const int max_lane = int((lane & segmask) | (cval & ~segmask));
  const uint32_t min_lane = lane & segmask;
  int j = 0;
  bool pval = false;
  switch (op) {
    case WarpOp::shfl_up:
      j = int(lane) - int(bval), pval = j >= max_lane;
      break;
    case WarpOp::shfl_down:
      j = int(lane + bval), pval = j <= max_lane;
      break;
    case WarpOp::shfl_xor:
      j = int(lane ^ bval), pval = j <= max_lane;
      break;
    default:  // shfl_idx
      j = int(min_lane | (bval & ~segmask)), pval = j <= max_lane;
      break;
  }
  return pval ? uint32_t(j) : lane;
}

// All lanes in `arrived` wait in the same collective: compute their results.
void complete(Launch& L, int base, unsigned arrived, const WarpArgs& a) {
  if (a.op == WarpOp::exchange) {  // every lane's block, lane after lane, in the warp's staging
    std::vector<unsigned char>& st = L.staging[size_t(base / 32)];  // sized at the launch's first exchange
    for (int lane = 0; lane < 32; ++lane)
      race::unseen_copy(st.data() + size_t(lane) * size_t(a.size), L.fibers[base + lane]->warp.data, size_t(a.size));
  }
  uint64_t value[32] = {};
  unsigned votes = 0;
  for (unsigned m = arrived; m; m &= m - 1) {
    const int lane = __builtin_ctz(m);
    value[lane] = L.fibers[base + lane]->warp.value;
    if (value[lane]) votes |= 1u << lane;
  }
  const uint64_t poison = a.size >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * a.size)) - 1;
  for (unsigned m = arrived; m; m &= m - 1) {
    const int lane = __builtin_ctz(m);
    Fiber& f = *L.fibers[base + lane];
    switch (a.op) {
      case WarpOp::ballot:
        f.warp_result = votes;
        break;
      case WarpOp::any:
        f.warp_result = votes != 0;
        break;
      case WarpOp::all:
        f.warp_result = votes == arrived;
        break;
      case WarpOp::sync:
        f.warp_result = 0;
        break;
      case WarpOp::exchange:
        f.warp_result = reinterpret_cast<uintptr_t>(L.staging[size_t(base / 32)].data());
        break;
      default: {
        const uint32_t src = source_lane(a.op, uint32_t(lane), f.warp.arg, a.width);
        f.warp_result = (arrived >> src & 1u) ? value[src] : poison;
      }
    }
    f.state = FiberState::runnable;
  }
}

}  // namespace

const char* warp_op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync:
      return "__syncwarp";
    case WarpOp::shfl_idx:
      return "__shfl_sync";
    case WarpOp::shfl_up:
      return "__shfl_up_sync";
    case WarpOp::shfl_down:
      return "__shfl_down_sync";
    case WarpOp::shfl_xor:
      return "__shfl_xor_sync";
    case WarpOp::ballot:
      return "__ballot_sync";
    case WarpOp::any:
      return "__any_sync";
    case WarpOp::all:
      return "__all_sync";
    case WarpOp::exchange:
      return "a warp-wide matrix instruction";
  }
  return "?";
}

std::string try_complete_warp(Launch& L, Fiber& waiter) {
  const int base = waiter.linear & ~31;
  const int lanes = std::min(32, L.nthreads - base);
  const unsigned exists = lanes == 32 ? ~0u : (1u << lanes) - 1;
  const WarpArgs& a = waiter.warp;
  unsigned arrived = 0;
  for (unsigned m = a.mask & exists; m; m &= m - 1) {
    const int lane = __builtin_ctz(m);
    const Fiber& g = *L.fibers[base + lane];
    switch (g.state) {
      case FiberState::done:
        if (a.op == WarpOp::exchange)
          return eng::cat(site(a.file, a.line), ": ", a.what, " in warp ", base / 32, ": lane ", lane, " (",
                          thread_name(g), ") has returned while ", thread_name(waiter),
                          " waits here; .sync.aligned needs all 32 lanes of the warp at the same instruction");
        continue;  // exited lanes take no part
      case FiberState::at_warp:
        if (!same_collective(g.warp, a) && (a.op == WarpOp::exchange || g.warp.op == WarpOp::exchange))
          return eng::cat(site(a.file, a.line), ": divergent warp in warp ", base / 32, ": ", thread_name(waiter),
                          " waits in ", describe(a), ", but lane ", lane, " (", thread_name(g), ") waits in ",
                          describe(g.warp),
                          "; a .sync.aligned instruction (mma.sync, ldmatrix) must be executed by all 32 lanes "
                          "of the warp at the same instruction");
        if (!same_collective(g.warp, a))
          return eng::cat(site(a.file, a.line), ": mismatched warp collectives in warp ", base / 32, ": ",
                          thread_name(waiter), " waits in ", describe(a), " here, but lane ", lane, " (",
                          thread_name(g), ") waits in ", describe(g.warp), " at ", site(g.warp.file, g.warp.line),
                          "; every non-exited lane of a mask must call the same collective with the same mask");
        arrived |= 1u << lane;
        continue;
      case FiberState::at_barrier:
        return eng::cat(site(a.file, a.line), ": deadlock: ", thread_name(waiter), " waits in ",
                        a.op == WarpOp::exchange ? a.what : warp_op_name(a.op), " for lane ", lane, " (",
                        thread_name(g), "), which waits at __syncthreads() at ", site(g.file, g.line));
      default:
        return "";  // this lane has not arrived yet
    }
  }
  complete(L, base, arrived, a);
  return "";
}

}  // namespace emu::detail

namespace emu {
using namespace detail;

uint64_t warp_collective(const WarpArgs& a) {
  Fiber& f = current_fiber(warp_op_name(a.op), a.file, a.line);
  Launch& L = *g_launch;
  const int lane = f.linear & 31;
  if (!(a.mask >> lane & 1u))
    fail(a.file, a.line,
         eng::cat(warp_op_name(a.op), ": mask ", hex(a.mask), " does not include the calling lane ", lane, " (",
                  thread_name(f), ")"));
  if (is_shuffle(a.op) && (a.width < 1 || a.width > 32 || (a.width & (a.width - 1))))
    fail(a.file, a.line, eng::cat(warp_op_name(a.op), ": width ", a.width, " is not a power of two in [1, 32]"));
  f.warp = a;
  f.file = a.file;
  f.line = a.line;
  if constexpr (race::enabled) {
    // Lanes already waiting with this mask are in the same rendezvous (a lane
    // waits in one at a time): share its sync object, else open a fresh one.
    f.sync = nullptr;
    const int base = f.linear & ~31;
    for (int i = base; i < std::min(base + 32, L.nthreads) && !f.sync; ++i) {
      const Fiber& g = *L.fibers[size_t(i)];
      if (g.state == FiberState::at_warp && g.warp.mask == a.mask) f.sync = g.sync;
    }
    if (!f.sync) f.sync = race::new_sync();
    race::release(f.sync);
  }
  f.state = FiberState::at_warp;
  const std::string err = try_complete_warp(L, f);
  if (!err.empty()) throw eng::Error(err);
  if (f.state == FiberState::at_warp)
    wait(f);
  else
    f.state = FiberState::running;
  race::acquire(f.sync);
  return f.warp_result;
}

const unsigned char* warp_exchange(const void* mine, int bytes, uint32_t variant, const char* what, const char* file,
                                   int line) {
  Fiber& f = current_fiber(what, file, line);
  Launch& L = *g_launch;
  const int base = f.linear & ~31;
  if (L.nthreads - base < 32)
    fail(file, line,
         eng::cat(what, " in ", thread_name(f), ": its warp has ", L.nthreads - base,
                  " threads; .sync.aligned needs all 32 lanes (make the block a multiple of 32 threads)"));
  if (bytes < 1 || bytes > kMaxExchangeBytes)
    fail(file, line,
         eng::cat(what, ": a lane's block of ", bytes, " bytes; the exchange moves 1 to ", kMaxExchangeBytes));
  if (L.staging.empty()) {
    // Once per launch, never reallocated during it: lanes read their warp's
    // staging after the rendezvous, so it must not move under them. The
    // emulator's memory, not the kernel's: the race check does not see it.
    [[maybe_unused]] race::Unseen unseen;
    L.staging.resize(size_t((L.nthreads + 31) / 32));
    for (auto& st : L.staging) st.resize(32 * kMaxExchangeBytes);
  }
  WarpArgs a{WarpOp::exchange, ~0u, 0, variant, 32, bytes, file, line};
  a.data = mine;
  a.what = what;
  return reinterpret_cast<const unsigned char*>(uintptr_t(warp_collective(a)));
}

}  // namespace emu
