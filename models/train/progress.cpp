// Progress display, metrics file and the peak-FLOP/s reference.
#include "models/train/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "comm/world.h"
#include "io/durable_file.h"
#include "kernels/gemm/gemm.h"
#include "models/train/tb_tags.h"

namespace eng::models {

static std::string human_bytes(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1024.0 * 1024.0));
  return buf;
}

static std::string human_time(double s) {
  char buf[32];
  const int64_t t = int64_t(s);
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60),
                (long long)(t % 60));
  return buf;
}

namespace {

// Under mpirun or srun, a rank's stdout is the launcher's own pseudo-terminal
// (Open MPI makes one) whatever mpirun's stdout is, so isatty() says nothing
// about where the lines end up: there the log form is used, unless the
// launcher says its stdout is a terminal (scripts/mpirun.sh exports
// ENGINE_STDOUT_TTY=1 then).
bool live_terminal() {
  if (!::isatty(STDOUT_FILENO)) return false;
  if (comm::launcher_env().empty()) return true;
  const char* v = std::getenv("ENGINE_STDOUT_TTY");
  return v && std::string(v) == "1";
}

}  // namespace

Progress::Progress(const std::string& metrics_path, int64_t log_every, int64_t first_step, bool enabled,
                   std::string unit, const std::string& tb_dir)
    : path_(metrics_path),
      log_every_(std::max<int64_t>(log_every, 1)),
      tty_(live_terminal()),
      enabled_(enabled),
      unit_(std::move(unit)) {
  if (!enabled_) return;
  if (first_step > 0) {
    // Resumed: keep the lines up to the checkpoint's step, drop later ones
    // (those steps run again) and a torn last line. The kept lines go to a
    // new file renamed over the old one, so a kill at any moment leaves
    // either the old history or the new, never a part of one.
    std::string keep;
    {
      std::ifstream in(metrics_path);
      std::string line;
      while (std::getline(in, line)) {
        try {
          if (nlohmann::json::parse(line).value("step", int64_t(0)) <= first_step) keep += line + "\n";
        } catch (const std::exception&) {
          // A torn last line from a killed run: dropped.
        }
      }
    }
    const std::string tmp = metrics_path + ".tmp";
    write_file_durably(tmp, keep);
    rename_durably(tmp, metrics_path);
  }
  metrics_ = std::fopen(metrics_path.c_str(), first_step > 0 ? "a" : "w");
  ENGINE_USER_CHECK(metrics_, metrics_path, ": cannot open for writing: ", std::strerror(errno));
  // The steps from first_step + 1 run (again): TensorBoard drops what earlier
  // event files hold for them, as this file drops the lines above.
  if (!tb_dir.empty()) tb_ = std::make_unique<TbWriter>(tb_dir, first_step + 1);
}

Progress::~Progress() {
  if (metrics_) std::fclose(metrics_);
}

void Progress::write_metrics(const nlohmann::json& j) {
  if (!error_.empty()) return;  // the run is stopping; nothing more to this file
  const std::string line = j.dump() + "\n";
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), metrics_) != line.size() || std::fflush(metrics_) != 0)
    error_ = cat(path_, ": write failed: ", errno ? std::strerror(errno) : "unknown error");
  if (tb_ && error_.empty()) error_ = tb_->scalars(j.value("step", int64_t(0)), tb_scalars(j));
}

void Progress::flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 && error_.empty())
    error_ = cat("standard output: write failed: ", errno ? std::strerror(errno) : "unknown error");
}

void Progress::end_live_line() {
  if (live_) std::printf("\n");
  live_ = false;
}

void Progress::step(const StepStats& s) {
  if (!enabled_) return;
  nlohmann::json j{{"step", s.step},
                   {"loss", s.loss},
                   {"lr", s.lr},
                   {"grad_norm", s.grad_norm},
                   {unit_ == "tok" ? "tokens_per_s" : "images_per_s", s.items_per_s},
                   {"flops_per_s", s.flops_per_s},
                   {"mfu", s.mfu >= 0 ? nlohmann::json(s.mfu) : nlohmann::json()},
                   {"mem_peak_bytes", s.mem_bytes}};
  j.update(s.extra);
  if (s.data) {
    j["data_wait_ms"] = 1e3 * s.data->wait_s;
    j["data_mb_per_s"] = s.data->read_mb_per_s();
    interval_.wait_s += s.data->wait_s;
    interval_.interval_s += s.data->interval_s;
    interval_.bytes += s.data->bytes;
    ++interval_steps_;
  }
  write_metrics(j);
  char util[48];
  if (s.mfu >= 0)
    std::snprintf(util, sizeof util, "MFU %.1f%%", 100.0 * s.mfu);
  else
    std::snprintf(util, sizeof util, "%.1f GFLOP/s", s.flops_per_s / 1e9);
  char data[96] = "";
  if (interval_steps_ > 0 && interval_.interval_s > 0)
    std::snprintf(data, sizeof data, " | data wait %.1f ms (%.1f%%) %.1f MB/s",
                  1e3 * interval_.wait_s / double(interval_steps_), 100.0 * interval_.wait_s / interval_.interval_s,
                  interval_.read_mb_per_s());
  char line[320];
  std::snprintf(line, sizeof line,
                "step %6lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f %s/s | %s%s | ETA %s | mem %s",
                (long long)s.step, (long long)s.total, s.loss, s.lr, s.grad_norm, s.items_per_s, unit_.c_str(), util,
                data, human_time(s.eta_s).c_str(), human_bytes(s.mem_bytes).c_str());
  const bool log_line = s.step % log_every_ == 0 || s.step == s.total || s.step == 1;
  if (tty_) {
    std::printf("\r\033[K%s", line);
    live_ = true;
  } else if (log_line) {
    std::printf("%s\n", line);
  }
  if (log_line) interval_ = LoaderStats(), interval_steps_ = 0;  // the data figures are per logging interval
  flush_stdout();
}

void Progress::val(int64_t step, double val_loss, const nlohmann::json& metrics, const std::string& line) {
  if (!enabled_) return;
  nlohmann::json j{{"step", step}, {"val_loss", val_loss}};
  j.update(metrics);
  write_metrics(j);
  end_live_line();
  std::printf("step %6lld | val loss %.4f%s%s\n", (long long)step, val_loss, line.empty() ? "" : " | ", line.c_str());
  flush_stdout();
}

void Progress::message(const std::string& text) {
  if (!enabled_) return;
  end_live_line();
  std::printf("%s\n", text.c_str());
  flush_stdout();
}

void Progress::finish() { end_live_line(); }

}  // namespace eng::models
