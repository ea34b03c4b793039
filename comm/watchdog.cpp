// Pending-collective registry and the watchdog thread (see watchdog.h).
#include "comm/watchdog.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "comm/world.h"

namespace eng::comm {

namespace {
using Clock = std::chrono::steady_clock;
struct Pending {
  std::string what;
  Clock::time_point since;
};
std::mutex g_mu;
std::map<uint64_t, Pending> g_pending;  // by id: the oldest first
uint64_t g_next = 1;                    // ids of every watched op
uint64_t g_issued = 0;                  // collectives (op_begin) only: their numbers in messages and stall:RANK:N

uint64_t begin(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_mu);
  const uint64_t id = g_next++;
  g_pending[id] = {what, Clock::now()};
  return id;
}

// ENGINE_FAULT=stall:RANK:TEXT (watchdog.h): stalls this rank when it names it and `what` contains TEXT.
void maybe_stall_at(const std::string& what) {
  static const char* spec = std::getenv("ENGINE_FAULT");
  static std::atomic<bool> fired{false};
  if (!spec || fired) return;
  int rank = -1, used = 0;
  if (std::sscanf(spec, "stall:%d:%n", &rank, &used) != 1 || used == 0 || rank != world().rank) return;
  const std::string text = spec + used;
  if (text.empty() || text.find_first_not_of("0123456789") == std::string::npos) return;  // a number: maybe_stall's
  if (what.find(text) == std::string::npos || fired.exchange(true)) return;
  std::fprintf(stderr, "rank %d: ENGINE_FAULT: stalling instead of entering %s\n", rank, what.c_str());
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
thread_local std::string t_label;
}  // namespace

uint64_t op_begin(const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_issued;
  }
  return begin(what);
}

WatchedCall::WatchedCall(const std::string& what) {
  maybe_stall_at(what);
  id_ = begin(what);
}
WatchedCall::~WatchedCall() { op_end(id_); }

void op_end(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_pending.erase(id);
}

void set_op_label(const std::string& label) { t_label = label; }
const std::string& op_label() { return t_label; }

uint64_t ops_issued() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_issued;
}

void start_watchdog(double timeout_s) {
  static std::once_flag once;
  if (timeout_s <= 0) return;
  std::call_once(once, [timeout_s] {
    std::thread([timeout_s] {
      for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::string msg;
        {
          std::lock_guard<std::mutex> lock(g_mu);
          if (g_pending.empty()) continue;
          const auto& [id, op] = *g_pending.begin();
          const double waited = std::chrono::duration<double>(Clock::now() - op.since).count();
          if (waited < timeout_s) continue;
          char buf[96];
          std::snprintf(buf, sizeof buf, " has not completed after %.1f s (--comm_timeout %g)", waited, timeout_s);
          msg = op.what + buf;
        }
        std::fprintf(stderr,
                     "rank %d: train: error: comm timeout: %s: a rank of its group has not entered it (stalled, "
                     "crashed, in another collective, or busy for longer than the timeout, e.g. rank 0 saving a "
                     "checkpoint)\n",
                     world().rank, msg.c_str());
        // MPI_Abort from this thread needs MPI_THREAD_MULTIPLE; without it,
        // end this process alone: mpirun then ends the job (a rank died).
        if (!world().thread_multiple) {
          std::fflush(stderr);
          std::_Exit(1);
        }
        abort_world(1);
      }
    }).detach();
  });
}

void maybe_stall(uint64_t seq) {
  static const char* spec = std::getenv("ENGINE_FAULT");
  if (!spec) return;
  int rank = -1;
  unsigned long long at = 0;
  if (std::sscanf(spec, "stall:%d:%llu", &rank, &at) != 2 || rank != world().rank || at != seq) return;
  std::fprintf(stderr, "rank %d: ENGINE_FAULT: stalling instead of issuing collective #%llu\n", rank, at);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace eng::comm
