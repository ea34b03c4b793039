// The peak a training run's MFU divides by (engine/peaks.h), kept honest: on
// the cpu the peak is a measurement, and a run faster than it proves the
// measurement wrong (a cold or disturbed one). Then it is measured once
// more; still exceeded, MFU is switched off for the run (FLOP/s shown
// instead), each said once as a progress message.
#pragma once
#include "engine/device.h"
#include "engine/peaks.h"
#include "engine/precision.h"
#include "models/train/progress.h"
#include "models/train/task.h"

namespace eng::models {

class MfuPeak {
 public:
  // Measures (cpu) or looks up (cuda) the peak, and says it.
  MfuPeak(Device dev, Precision level, const PeakGemm& gemm, Progress& progress);
  // A device's MFU at flops_per_s (< 0: no peak to compare with).
  double mfu(double flops_per_s);

 private:
  Device dev_;
  PeakGemm gemm_;
  Progress& progress_;
  DevicePeak peak_;
  bool rechecked_ = false;
};

}  // namespace eng::models
