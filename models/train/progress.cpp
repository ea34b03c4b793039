// Progress display, metrics file and the peak-FLOP/s reference.
#include "models/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/error.h"
#include "kernels/gemm/gemm.h"

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

Progress::Progress(const std::string& metrics_path, int64_t log_every, int64_t first_step, bool enabled,
                   std::string unit)
    : log_every_(std::max<int64_t>(log_every, 1)),
      tty_(::isatty(STDOUT_FILENO)),
      enabled_(enabled),
      unit_(std::move(unit)) {
  if (!enabled_) return;
  // Keep the lines of earlier steps on resume, drop any from after the checkpoint.
  std::vector<std::string> keep;
  {
    std::ifstream in(metrics_path);
    std::string line;
    while (std::getline(in, line)) {
      try {
        if (nlohmann::json::parse(line).value("step", int64_t(0)) <= first_step) keep.push_back(line);
      } catch (const std::exception&) {
        // A torn last line from a killed run: drop it.
      }
    }
  }
  metrics_.open(metrics_path, std::ios::trunc);
  ENGINE_CHECK(metrics_, metrics_path, ": cannot open for writing");
  for (const std::string& l : keep) metrics_ << l << "\n";
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
  metrics_ << j.dump() << "\n";
  metrics_.flush();
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
  std::fflush(stdout);
}

void Progress::val(int64_t step, double val_loss, const nlohmann::json& metrics, const std::string& line) {
  if (!enabled_) return;
  nlohmann::json j{{"step", step}, {"val_loss", val_loss}};
  j.update(metrics);
  metrics_ << j.dump() << "\n";
  metrics_.flush();
  end_live_line();
  std::printf("step %6lld | val loss %.4f%s%s\n", (long long)step, val_loss, line.empty() ? "" : " | ", line.c_str());
  std::fflush(stdout);
}

void Progress::message(const std::string& text) {
  if (!enabled_) return;
  end_live_line();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

void Progress::finish() { end_live_line(); }

}  // namespace eng::models
