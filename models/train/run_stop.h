// How a run stops early with its work saved: a scheduler's signal, or the
// wall-time checkpoint clock.
//   - SIGTERM, SIGUSR1 and SIGINT set a flag and nothing else; the step loop
//     reads it at the next step boundary, every rank agreeing through one
//     small all-reduce (a signal may reach one rank only, or the ranks at
//     different steps), writes a complete checkpoint and exits with
//     kStoppedExit. A second signal while the first is pending ends the
//     process at once, as the signal's default would. Slurm sends SIGTERM
//     at a time limit or a preemption (SIGKILL follows after KillWait), or
//     the signal --signal asks for ahead of the limit; mpirun forwards
//     SIGUSR1 to every rank (SIGTERM it turns into SIGKILL after 1 s).
//   - --checkpoint_minutes M: rank 0's clock says when M minutes have passed
//     since the last checkpoint (or the start), and every rank saves at the
//     same step boundary, so a crash loses at most about M minutes.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace eng::models {

// The exit status of a run stopped by a signal after its checkpoint was
// saved: EX_TEMPFAIL of sysexits.h ("try again"), what the Slurm scripts
// requeue on. Any other status is a finished run or an error.
constexpr int kStoppedExit = 75;

// Installs the three handlers. announce: this process (rank 0) writes one
// line to stderr when the first signal arrives, so a user who pressed
// Ctrl-C knows the run is finishing its step.
void install_stop_handlers(bool announce);
// The signal that asked this process to stop, 0 while none has.
int stop_signal();
// "SIGTERM", "SIGUSR1", "SIGINT", else "signal N".
std::string signal_name(int sig);
// Back to the default actions: once the final checkpoint is written there is
// nothing left to save, and a signal ends the closing validation at once.
void restore_default_signals();
// Test-only: ENGINE_FAULT=signal:RANK:STEP:NAME raises signal NAME (TERM,
// USR1, INT) in world rank RANK at the start of step STEP (1-based), as if a
// scheduler had sent it to that rank alone.
void inject_signal(int64_t step);

// Rank 0's wall-time clock for --checkpoint_minutes (0: never due).
class CheckpointClock {
 public:
  explicit CheckpointClock(double minutes) : minutes_(minutes) {}
  bool due() const;
  void reset() { last_ = std::chrono::steady_clock::now(); }  // a checkpoint was written

 private:
  double minutes_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// What every rank decides together at the end of step `step`: whether
// rank 0 failed to write its metrics or log, which stop signal any rank
// has received (0: none) and whether the checkpoint clock is due. One
// all-reduce under the watchdog; each rank passes what it knows.
struct StepEnd {
  bool io_failed = false;
  int signal = 0;
  bool clock_due = false;
};
StepEnd agree_step_end(const StepEnd& mine, int64_t step);

}  // namespace eng::models
