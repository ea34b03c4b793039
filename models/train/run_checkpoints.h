// The checkpoints a run writes at its step ends, and when it stops there.
// After each step every rank agrees, in one small all-reduce under the
// watchdog, on three things: rank 0's write error (its metrics or log
// failed: a full disk), a stop signal any rank received (run_stop.h), and
// rank 0's wall-time clock (--checkpoint_minutes M: M minutes since the
// last checkpoint or the start, so a crash loses at most about that much).
//   - The final step's checkpoint, and the one a signal or a write error
//     asks for, are written before that step's validation and samples (a
//     long sample must not outlast a scheduler's grace period); then a
//     signal stops the run, a write error ends it naming the file.
//   - The periodic ones (--checkpoint_every) and the clock's come after them.
// Every rank takes part in each save (it gathers); rank 0 writes.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "models/train/progress.h"

namespace eng::models {

class RunCheckpoints {
 public:
  // save(step): the collective save; dir: where it goes (for the messages);
  // minutes: --checkpoint_minutes (0: no clock); every: --checkpoint_every (0: none);
  // keep: --keep_checkpoints (0: the latest only; kept_checkpoints.h).
  RunCheckpoints(std::function<void(int64_t)> save, std::string dir, double minutes, int64_t every, int64_t keep,
                 Progress& progress, bool lead);
  // Right after step `done`'s metrics line (end: this run's last step).
  // Returns the signal that stops the run once its checkpoint is written and
  // rank 0 has said so, else 0. Throws WorldError on every rank after a
  // write error, naming it, the checkpoint's fate and what to do next.
  int before_evaluation(int64_t done, int64_t end);
  // After step `done`'s validation and samples: the periodic and the clock's checkpoint.
  void after_evaluation(int64_t done, int64_t end);

 private:
  std::string write(int64_t done, bool io_failed);  // "checkpoint saved at step N", or the error a failed save gave
  bool clock_due() const;

  std::function<void(int64_t)> save_;
  std::string dir_;
  double minutes_;
  int64_t every_, keep_;
  Progress& progress_;
  bool lead_;
  bool clock_due_ = false;  // agreed at this step's end
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace eng::models
