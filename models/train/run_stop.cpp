// Stop signals (see run_stop.h).
#include "models/train/run_stop.h"

#include <unistd.h>

#include <csignal>

#include "base/error.h"

namespace eng::models {

namespace {

constexpr int kSignals[] = {SIGTERM, SIGUSR1, SIGINT};

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_announce = 0;

// Only async-signal-safe calls in here: write(2), signal(2), raise(3).
extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {  // the second: the default action, at once
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
  if (g_announce) {
    // On a terminal the newline first ends the live progress line.
    static const char msg[] =
        "\ntrain: stop signal received: finishing this step, then a checkpoint "
        "(signal again to exit at once)\n";
    const int skip = g_announce == 2 ? 0 : 1;
    const ssize_t n = ::write(STDERR_FILENO, msg + skip, sizeof msg - 1 - size_t(skip));
    (void)n;  // nothing to do about a failed write inside a handler
  }
}

}  // namespace

void install_stop_handlers(bool announce) {
  g_announce = !announce ? 0 : ::isatty(STDERR_FILENO) ? 2 : 1;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or an MPI poll the signal lands in goes on
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

int stop_signal() { return g_signal; }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return cat("signal ", sig);
  }
}

void restore_default_signals() {
  for (int sig : kSignals) std::signal(sig, SIG_DFL);
  if (g_signal != 0) std::raise(g_signal);  // one that came during the final save: its default now
}

}  // namespace eng::models
