// Forecast skill of the weather ViT with the formulas of the NERSC "Deep
// Learning at Scale" tutorial and FourCastNet (utils/weighted_acc_rmse.py):
//   latitude weights  w_i = cos(lat_i) / mean_i cos(lat_i) over the H rows
//       (their mean is 1): a row near a pole covers less of the sphere;
//   RMSE  per sample b and channel c: sqrt(mean_ij w_i (pred - tar)^2);
//   ACC   per sample and channel, on anomalies from the climatology,
//       a = pred - clim, t = tar - clim:  sum w a t / sqrt(sum w a^2 sum w t^2),
//       0 where the denominator is 0 (a constant field correlates with nothing);
// each reported per channel as the mean over samples. The same two for the
// persistence forecast (the out channels' input fields at t taken as the
// forecast for t + dt), the baseline a model must beat.
// Two differences from their numbers: the RMSE is in normalised units
// (theirs is multiplied back by each channel's std), and the latitudes are
// the caller's (the file's `lat`, else cell centres), where theirs are
// 90 - 180 j / (H - 1), poles included, over the cropped rows.
// Conventions: host float arrays of B samples of (C, H, W), row-major, in the
// normalised units the model predicts (the climatology likewise: see
// WeatherDataset::climatology()); sums in double. The state is a few sums per
// channel, so a distributed evaluation adds on every rank, all-reduces sums()
// and puts them back with set_sums().
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace eng::models {

class ForecastMetrics {
 public:
  // latitudes in degrees, one per row (H of them); C channels of H x W; clim:
  // C*H*W normalised values, or empty for a climatology of zeros (then the ACC
  // is that of the normalised fields, whose per-channel mean is 0).
  ForecastMetrics(const std::vector<double>& latitudes, int64_t C, int64_t W, std::vector<float> clim = {});

  // pred, target, persistence: B samples of (C, H, W). persistence may be null;
  // its metrics are then means over the samples that had one.
  void add(const float* pred, const float* target, const float* persistence, int64_t B);

  // The running sums, flat (counts, then per-channel sums), so a distributed
  // run can all-reduce them (sum over ranks) and put them back.
  std::vector<double> sums() const { return sums_; }
  void set_sums(const std::vector<double>& s);

  struct Result {
    int64_t samples = 0;
    // C values each; the persistence ones are empty when no persistence was added.
    std::vector<double> rmse, acc, rmse_persistence, acc_persistence;
  };
  Result result() const;  // means over the samples added (after set_sums, over all ranks)

  const std::vector<double>& weights() const { return w_; }  // w_i, one per row

 private:
  // Adds sample rmse and acc of every channel of one (C, H, W) forecast to
  // sums_ at rmse_at and rmse_at + C.
  void add_one(const float* forecast, const float* target, size_t rmse_at);

  int64_t C_, H_, W_;
  std::vector<double> w_;
  std::vector<float> clim_;
  // [samples, persistence samples, rmse (C), acc (C), rmse_persistence (C), acc_persistence (C)]
  std::vector<double> sums_;
};

}  // namespace eng::models
