// Training progress output: a live one-line display on a terminal (rewritten
// in place with \r), plain lines every log_every steps otherwise (logs, CI),
// and a JSON-lines metrics file a user can plot
// (step, loss, val_loss, lr, grad_norm, tokens_per_s, flops_per_s, mfu).
#pragma once
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/device.h"

namespace eng::models {

struct StepStats {
  int64_t step = 0, total = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0, flops_per_s = 0, eta_s = 0;
  double mfu = -1;  // < 0: no peak to compare with (emu, an unknown GPU, a peak found wrong): FLOP/s shown instead
  size_t mem_bytes = 0;
};

class Progress {
 public:
  // enabled = false: silent, no metrics file (every rank of a distributed
  // run but rank 0).
  Progress(const std::string& metrics_path, int64_t log_every, int64_t first_step, bool enabled = true);
  void step(const StepStats& s);
  void val(int64_t step, double val_loss);
  void message(const std::string& text);  // ends a live line first
  void finish();

 private:
  void end_live_line();
  std::ofstream metrics_;
  int64_t log_every_;
  bool tty_;
  bool enabled_ = true;
  bool live_ = false;
};

}  // namespace eng::models
