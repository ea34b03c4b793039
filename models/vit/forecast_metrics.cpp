// Latitude-weighted RMSE and ACC of forecasts (see forecast_metrics.h).
#include "models/vit/forecast_metrics.h"

#include <cmath>
#include <utility>

#include "base/error.h"

namespace eng::models {

namespace {
constexpr size_t kCounts = 2;  // samples, persistence samples: the head of sums_
constexpr double kPi = 3.14159265358979323846;
}  // namespace

ForecastMetrics::ForecastMetrics(const std::vector<double>& latitudes, int64_t C, int64_t W, std::vector<float> clim)
    : C_(C), H_(int64_t(latitudes.size())), W_(W), clim_(std::move(clim)) {
  ENGINE_CHECK(C_ > 0 && H_ > 0 && W_ > 0, "forecast metrics: need channels, latitudes and width, got C = ", C_, ", ",
               H_, " latitudes, W = ", W_);
  ENGINE_CHECK(clim_.empty() || int64_t(clim_.size()) == C_ * H_ * W_, "forecast metrics: climatology of ",
               clim_.size(), " values, expected C * H * W = ", C_ * H_ * W_);
  sums_.assign(kCounts + 4 * size_t(C_), 0.0);
  double sum = 0;
  for (double lat : latitudes) sum += w_.emplace_back(std::cos(lat * kPi / 180));
  const double mean = sum / double(H_);
  ENGINE_CHECK(mean > 0, "forecast metrics: latitudes with no area (all at the poles?)");
  for (double& w : w_) w /= mean;
}

void ForecastMetrics::add_one(const float* forecast, const float* target, size_t rmse_at) {
  const int64_t n = H_ * W_;
  for (int64_t c = 0; c < C_; ++c) {
    const float* p = forecast + c * n;
    const float* t = target + c * n;
    const float* m = clim_.empty() ? nullptr : clim_.data() + c * n;
    // Weighted sums of squared error, anomaly products and squares; each row
    // summed on its own first, then weighted once.
    double se = 0, at = 0, aa = 0, tt = 0;
    for (int64_t i = 0; i < H_; ++i) {
      double row_se = 0, row_at = 0, row_aa = 0, row_tt = 0;
      for (int64_t j = i * W_; j < (i + 1) * W_; ++j) {
        const double ref = m ? double(m[j]) : 0.0, a = double(p[j]) - ref, b = double(t[j]) - ref;
        const double d = double(p[j]) - double(t[j]);
        row_se += d * d, row_at += a * b, row_aa += a * a, row_tt += b * b;
      }
      const double w = w_[size_t(i)];
      se += w * row_se, at += w * row_at, aa += w * row_aa, tt += w * row_tt;
    }
    const double den = std::sqrt(aa * tt);
    sums_[rmse_at + size_t(c)] += std::sqrt(se / double(n));
    sums_[rmse_at + size_t(C_ + c)] += den > 0 ? at / den : 0.0;
  }
}

void ForecastMetrics::add(const float* pred, const float* target, const float* persistence, int64_t B) {
  ENGINE_CHECK(B >= 0 && (B == 0 || (pred && target)), "forecast metrics: add needs pred and target, got B = ", B);
  const int64_t sample = C_ * H_ * W_;
  for (int64_t b = 0; b < B; ++b) {
    add_one(pred + b * sample, target + b * sample, kCounts);
    if (persistence) add_one(persistence + b * sample, target + b * sample, kCounts + 2 * size_t(C_));
  }
  sums_[0] += double(B);
  if (persistence) sums_[1] += double(B);
}

void ForecastMetrics::set_sums(const std::vector<double>& s) {
  ENGINE_CHECK(s.size() == sums_.size(), "forecast metrics: ", s.size(), " sums, expected ", sums_.size(),
               " (2 + 4 * channels): metrics of another channel count?");
  sums_ = s;
}

ForecastMetrics::Result ForecastMetrics::result() const {
  Result r;
  r.samples = int64_t(sums_[0]);
  // Means of C sums starting at `at` over `count` samples (zeros for none).
  auto means = [&](size_t at, double count) {
    std::vector<double> v(size_t(C_), 0.0);
    for (size_t c = 0; c < v.size(); ++c) v[c] = count > 0 ? sums_[at + c] / count : 0.0;
    return v;
  };
  r.rmse = means(kCounts, sums_[0]);
  r.acc = means(kCounts + size_t(C_), sums_[0]);
  if (sums_[1] > 0) {
    r.rmse_persistence = means(kCounts + 2 * size_t(C_), sums_[1]);
    r.acc_persistence = means(kCounts + 3 * size_t(C_), sums_[1]);
  }
  return r;
}

}  // namespace eng::models
