// Training progress output: a live one-line display on a terminal (rewritten
// in place with \r), plain lines every log_every steps otherwise (logs, CI,
// and under mpirun unless scripts/mpirun.sh says its stdout is a terminal),
// and a JSON-lines metrics file a user can plot (step, loss, val_loss, lr,
// grad_norm, tokens_per_s or images_per_s, flops_per_s, mfu, and with the
// HDF5 loader data_wait_ms and data_mb_per_s), and the same numbers as
// TensorBoard scalars (io/tensorboard.h, tags from tb_tags.h) when given a
// directory for the event file.
// With the data loader the line also says, per logging interval, how long
// the steps waited for data (ms per step, % of the wall time) and the
// readers' rate in MB/s.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/device.h"
#include "io/loader.h"
#include "io/tensorboard.h"

namespace eng::models {

struct StepStats {
  int64_t step = 0, total = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double items_per_s = 0, flops_per_s = 0, eta_s = 0;  // items: tokens or images
  double mfu = -1;  // < 0: no peak to compare with (emu, an unknown GPU, a peak found wrong): FLOP/s shown instead
  size_t mem_bytes = 0;
  std::optional<LoaderStats> data;                  // the loader's counters over this step
  nlohmann::json extra = nlohmann::json::object();  // more keys for this step's metrics line
};

class Progress {
 public:
  // enabled = false: silent, no metrics file (every rank of a distributed
  // run but rank 0).
  // unit: what items_per_s counts, "tok" (tokens_per_s) or "img" (images_per_s).
  // tb_dir: where the TensorBoard event file goes ("" for none); a new file
  // per run, starting with a SessionLog START at first_step + 1.
  Progress(const std::string& metrics_path, int64_t log_every, int64_t first_step, bool enabled = true,
           std::string unit = "tok", const std::string& tb_dir = "");
  void step(const StepStats& s);
  // The validation line: "val loss X" then `line`; `metrics` joins it in metrics.jsonl.
  void val(int64_t step, double val_loss, const nlohmann::json& metrics = nlohmann::json::object(),
           const std::string& line = "");
  void message(const std::string& text);  // ends a live line first
  void finish();
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // The first failed write to metrics.jsonl or stdout (a full disk: "...: No
  // space left on device"), "" while all is well. Nothing more is written
  // to metrics.jsonl after one; the train loop stops the run.
  const std::string& io_error() const { return error_; }

 private:
  void end_live_line();
  void write_metrics(const nlohmann::json& j);
  void flush_stdout();
  std::string path_;
  std::FILE* metrics_ = nullptr;
  std::unique_ptr<TbWriter> tb_;
  std::string error_;
  int64_t log_every_;
  bool tty_;
  bool enabled_ = true;
  bool live_ = false;
  std::string unit_;
  LoaderStats interval_;  // the loader's counters summed since the last logged line
  int64_t interval_steps_ = 0;
};

}  // namespace eng::models
