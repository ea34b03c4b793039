// Rank placement, agreement checks and the batch plan (see train_dist.h).
#include "models/train/train_dist.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/cuda_runtime.h"

namespace eng::models {

Device rank_device(Device requested) {
  const comm::World& w = comm::world();
  if (requested.type != DeviceType::cuda || w.size == 1) return requested;
  const int n = cudart::device_count();
  ENGINE_CHECK(n > 0, "rank ", w.rank, " on ", w.host, ": no CUDA device answers");
  ENGINE_CHECK(w.local_size <= n, w.host, " runs ", w.local_size, " ranks but has ", n,
               " GPU(s): ranks would share a GPU (start at most ", n, " ranks per node)");
  return Device{DeviceType::cuda, w.local_rank % n};
}

int share_cores() {
  const comm::World& w = comm::world();
  if (w.local_size > 1 && !std::getenv("OMP_NUM_THREADS"))
    omp_set_num_threads(std::max(1, int(std::thread::hardware_concurrency()) / w.local_size));
  return omp_get_max_threads();
}

void agree(const nlohmann::json& mine, const std::string& what, int peers) {
  const std::vector<std::string> all =
      comm::all_gather_strings(nlohmann::json{{"peers", peers}, {"v", mine}}.dump(), "the agreement on the " + what);
  for (size_t r = 1; r < all.size(); ++r) {
    const nlohmann::json other_all = nlohmann::json::parse(all[r]);
    size_t r0 = 0;  // the first rank with the same peers
    while (nlohmann::json::parse(all[r0])["peers"] != other_all["peers"]) ++r0;
    if (r0 == r || all[r] == all[r0]) continue;
    const nlohmann::json root = nlohmann::json::parse(all[r0])["v"];
    const nlohmann::json other = other_all["v"];
    std::string key = "?";
    for (auto it = root.begin(); it != root.end(); ++it)
      if (!other.contains(it.key()) || other[it.key()] != it.value()) {
        key = it.key();
        break;
      }
    const std::string theirs = other.contains(key) ? other[key].dump() : "(missing)";
    throw WorldError(cat("ranks disagree on the ", what, ": rank ", r, " has ", key, " = ", theirs, ", rank ", r0,
                         " has ", root.contains(key) ? root[key].dump() : "(missing)",
                         " (every rank must run the same command)"));
  }
}

BatchPlan plan_batches(int64_t batch_size, int64_t grad_accum, int64_t global_batch, int64_t dp, int64_t dp_rank) {
  BatchPlan p;
  p.micro = batch_size, p.dp = dp, p.dp_rank = dp_rank, p.accum = grad_accum;
  if (global_batch > 0) {
    ENGINE_USER_CHECK(global_batch % (batch_size * dp) == 0, "config: global_batch ", global_batch,
                      " is not a multiple of batch_size x dp = ", batch_size, " x ", dp, " = ", batch_size * dp);
    p.accum = global_batch / (batch_size * dp);
  }
  return p;
}

void inject_fault(int64_t step) {
  static const char* spec = std::getenv("ENGINE_FAULT");
  if (!spec) return;
  int rank = -1;
  long long at = -1;
  if (std::strncmp(spec, "sleep:", 6) == 0) {  // a slow step: the scheduler tests' time limits come first
    long long ms = 0;
    ENGINE_CHECK(std::sscanf(spec, "sleep:%lld", &ms) == 1 && ms >= 0, "ENGINE_FAULT='", spec, "': expected sleep:MS");
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return;
  }
  if (std::strncmp(spec, "signal:", 7) == 0) {  // a scheduler's signal to this rank alone (run_stop.h)
    char name[8] = {};
    ENGINE_CHECK(std::sscanf(spec, "signal:%d:%lld:%7s", &rank, &at, name) == 3, "ENGINE_FAULT='", spec,
                 "': expected signal:RANK:STEP:TERM|USR1|INT");
    const int sig = std::strcmp(name, "TERM") == 0   ? SIGTERM
                    : std::strcmp(name, "USR1") == 0 ? SIGUSR1
                    : std::strcmp(name, "INT") == 0  ? SIGINT
                                                     : 0;
    ENGINE_CHECK(sig != 0, "ENGINE_FAULT='", spec, "': the signal is TERM, USR1 or INT");
    if (rank == comm::world().rank && at == step) std::raise(sig);
    return;
  }
  if (std::strncmp(spec, "throw:", 6) != 0) return;  // stall:... is comm's (watchdog.h)
  ENGINE_CHECK(std::sscanf(spec, "throw:%d:%lld", &rank, &at) == 2, "ENGINE_FAULT='", spec,
               "': expected throw:RANK:STEP");
  ENGINE_CHECK(!(rank == comm::world().rank && at == step), "injected fault (ENGINE_FAULT=", spec, ") at step ", step);
}

}  // namespace eng::models
