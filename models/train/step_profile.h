// `train --kernel_profile STEP`: one step's kernels recorded
// (engine/kernel_profile.h), measured on cuda, modelled on a named GPU
// (--model_gpu, engine/gpu_model.h) everywhere, printed as a table and
// written to OUT_DIR/kernel_profile.json (docs/profiling.md).
#pragma once
#include <memory>
#include <string>

#include "engine/device.h"
#include "engine/gpu_model.h"
#include "engine/kernel_profile.h"
#include "engine/precision.h"

namespace eng::models {

class StepProfile {
 public:
  // step: the 1-based step to record (0: none). Every rank records its own
  // step; the one that writes writes OUT_DIR/kernel_profile.json (rank 0).
  StepProfile(int64_t step, Device dev, Precision level, const std::string& model_gpu, std::string out_dir,
              bool writes);
  bool active() const { return step_ > 0; }
  int64_t step() const { return step_; }
  // Around step `step` (1-based): start listening before, report after. The
  // report: the table (returned, for rank 0 to print) and the JSON file.
  void before(int64_t step);
  std::string after(int64_t step);
  // Step N+2's wall time at O3 (one graph replay, after the capture at
  // N+1), said beside the eager step N's kernels.
  std::string replay_line(int64_t step, double seconds) const;

 private:
  int64_t step_;
  Device dev_;
  Precision level_;
  GpuModel gpu_;
  std::string out_dir_;
  bool writes_;
  std::unique_ptr<KernelProfile> profile_;
};

}  // namespace eng::models
