// Warp collectives under the emulator: __shfl_*_sync, __ballot_sync,
// __any_sync, __all_sync and __syncwarp.
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
#include <algorithm>
#include <cstdio>

#include "kernels/emu/race.h"
#include "kernels/emu/runtime.h"

namespace emu::detail {
namespace {

bool is_shuffle(WarpOp op) {
  return op == WarpOp::shfl_idx || op == WarpOp::shfl_up || op == WarpOp::shfl_down || op == WarpOp::shfl_xor;
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string describe(const WarpArgs& a) {
  if (!is_shuffle(a.op)) return eng::cat(warp_op_name(a.op), "(mask ", hex(a.mask), ")");
  return eng::cat(warp_op_name(a.op), "(mask ", hex(a.mask), ", width ", a.width, ", ", a.size, "-byte value)");
}

bool same_collective(const WarpArgs& a, const WarpArgs& b) {
  return a.op == b.op && a.mask == b.mask && a.width == b.width && a.size == b.size;
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
        continue;  // exited lanes take no part
      case FiberState::at_warp:
        if (!same_collective(g.warp, a))
          return eng::cat(site(a.file, a.line), ": mismatched warp collectives in warp ", base / 32, ": ",
                          thread_name(waiter), " waits in ", describe(a), " here, but lane ", lane, " (",
                          thread_name(g), ") waits in ", describe(g.warp), " at ", site(g.warp.file, g.warp.line),
                          "; every non-exited lane of a mask must call the same collective with the same mask");
        arrived |= 1u << lane;
        continue;
      case FiberState::at_barrier:
        return eng::cat(site(a.file, a.line), ": deadlock: ", thread_name(waiter), " waits in ", warp_op_name(a.op),
                        " for lane ", lane, " (", thread_name(g), "), which waits at __syncthreads() at ",
                        site(g.file, g.line));
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

}  // namespace emu
