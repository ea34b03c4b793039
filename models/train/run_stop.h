// How a run stops early with its work saved: a scheduler's signal.
//   - SIGTERM, SIGUSR1 and SIGINT set a flag and nothing else; the step loop
//     reads it at the next step boundary, every rank agreeing through one
//     small all-reduce (a signal may reach one rank only, or the ranks at
//     different steps), writes a complete checkpoint and exits with
//     kStoppedExit. A second signal while the first is pending ends the
//     process at once, as the signal's default would. Slurm sends SIGTERM
//     at a time limit or a preemption (SIGKILL follows after KillWait), or
//     the signal --signal asks for ahead of the limit; mpirun forwards
//     SIGUSR1 to every rank (SIGTERM it turns into SIGKILL after 1 s).
// The step-end decision that reads the flag is run_checkpoints.h's.
#pragma once
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
}  // namespace eng::models
