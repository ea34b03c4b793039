// The step ends' checkpoints and stops (see run_checkpoints.h).
#include "models/train/run_checkpoints.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "base/error.h"
#include "comm/world.h"
#include "engine/profile.h"
#include "models/train/kept_checkpoints.h"
#include "models/train/run_stop.h"
#include "models/train/train_dist.h"

namespace eng::models {

RunCheckpoints::RunCheckpoints(std::function<void(int64_t)> save, std::string dir, double minutes, int64_t every,
                               int64_t keep, Progress& progress, bool lead)
    : save_(std::move(save)),
      dir_(std::move(dir)),
      minutes_(minutes),
      every_(every),
      keep_(keep),
      progress_(progress),
      lead_(lead) {}

bool RunCheckpoints::clock_due() const {
  return minutes_ > 0 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count() >= minutes_ * 60.0;
}

std::string RunCheckpoints::write(int64_t done, bool io_failed) {
  const profile::Range r("checkpoint");
  std::string saved = cat("checkpoint saved at step ", done);
  try {
    save_(done);
    if (lead_ && keep_ > 0) keep_checkpoint(dir_, done, keep_);
  } catch (const Error& e) {
    if (!io_failed) throw;  // this rank's error ends the job
    saved = e.what();       // after a write error, the report says what became of the checkpoint
  }
  last_ = std::chrono::steady_clock::now();
  return saved;
}

int RunCheckpoints::before_evaluation(int64_t done, int64_t end) {
  // max over ranks: any rank's flag is everyone's; of two different signals the larger number is named.
  const std::vector<double> agreed = comm::all_reduce_host(
      {progress_.io_error().empty() ? 0.0 : 1.0, double(stop_signal()), lead_ && clock_due() ? 1.0 : 0.0},
      comm::HostOp::max, cat("the end-of-step flags of step ", done));
  const bool io_failed = agreed[0] > 0;
  const int signal = int(agreed[1]);
  clock_due_ = agreed[2] > 0;
  if (done != end && signal == 0 && !io_failed) return 0;
  const std::string saved = write(done, io_failed);
  if (signal != 0 && !io_failed)
    progress_.message(cat("stopped by ", signal_name(signal), " at step ", done, ": checkpoint at ", dir_,
                          " (--resume continues; exit status ", kStoppedExit, ")"));
  // Nobody runs ahead of (or exits before) a checkpoint another rank may fail to write.
  comm::barrier_world(cat("after the checkpoint of step ", done));
  if (io_failed)
    throw WorldError(comm::broadcast_string(
        cat(progress_.io_error(), ": the run stops at step ", done, "; ", saved,
            // No checkpoint at all (a full disk before the first): nothing to resume.
            std::filesystem::exists(dir_ + "/state.json") ? " (free space, then --resume)"
                                                          : " (free space, then start again with --overwrite)"),
        0, "rank 0's write error"));
  if (signal == 0) restore_default_signals();  // the final one: a signal now ends the closing validation at once
  return signal;
}

void RunCheckpoints::after_evaluation(int64_t done, int64_t end) {
  if (done == end || !((every_ > 0 && done % every_ == 0) || clock_due_)) return;
  write(done, false);
  comm::barrier_world(cat("after the checkpoint of step ", done));
}

}  // namespace eng::models
