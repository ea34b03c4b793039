// MFU against a peak that is checked against the run (models/train/mfu_peak.h).
#include "models/train/mfu_peak.h"

#include "base/error.h"

namespace eng::models {

MfuPeak::MfuPeak(Device dev, Precision level, const PeakGemm& gemm, Progress& progress)
    : dev_(dev), gemm_(gemm), progress_(progress), peak_(device_peak(dev, level, gemm.m, gemm.n, gemm.k)) {
  progress_.message("peak for MFU: " + peak_.note);
}

double MfuPeak::mfu(double flops_per_s) {
  if (peak_.flops > 0 && flops_per_s > peak_.flops && dev_.type == DeviceType::cpu) {
    const double again = measure_sgemm_flops(gemm_.m, gemm_.n, gemm_.k, 20);
    if (!rechecked_ && again > peak_.flops) {
      peak_.flops = again;
      progress_.message(cat("peak for MFU re-measured: ", again / 1e9, " GFLOP/s"));
    }
    if (rechecked_ || flops_per_s > peak_.flops) {
      progress_.message(cat("MFU off: the run's ", flops_per_s / 1e9, " GFLOP/s per device exceed the measured peak ",
                            peak_.flops / 1e9, " GFLOP/s, so that peak is not a bound; FLOP/s shown instead"));
      peak_.flops = 0;
    }
    rechecked_ = true;
  }
  return peak_.flops > 0 ? flops_per_s / peak_.flops : -1;
}

}  // namespace eng::models
