// Forecast metrics against references that do not reuse the code's formula:
// a plain unweighted RMSE loop where every latitude is 0 (weights 1), the
// exact cases a perfect and an inverted forecast give, and a 2 x 2 case worked
// out by hand; then the all-reduce contract (halves summed equal the whole)
// and the persistence forecast taken from the third array.
#include <cmath>
#include <vector>

#include "models/vit/forecast_metrics.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;
using namespace eng::test;
using Catch::Matchers::Contains;

namespace {

// B samples of (C, H, W): smooth, distinct values (seed tells arrays apart).
std::vector<float> fields(int64_t B, int64_t C, int64_t H, int64_t W, int seed) {
  std::vector<float> v(static_cast<size_t>(B * C * H * W));
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(std::sin(0.37 * double(k) + seed) + 0.1 * seed);
  return v;
}

// Per-channel mean over samples of the plain sqrt(mean (x - y)^2).
std::vector<double> plain_rmse(const std::vector<float>& x, const std::vector<float>& y, int64_t B, int64_t C,
                               int64_t n) {
  std::vector<double> r(static_cast<size_t>(C), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) {
        const size_t at = size_t((b * C + c) * n + k);
        s += (double(x[at]) - y[at]) * (double(x[at]) - y[at]);
      }
      r[size_t(c)] += std::sqrt(s / double(n)) / double(B);
    }
  return r;
}

}  // namespace

TEST_CASE("forecast metrics: at latitude 0 the RMSE is the plain RMSE", "[models][metrics]") {
  const int64_t B = 3, C = 2, H = 3, W = 5;
  const std::vector<float> pred = fields(B, C, H, W, 1), tar = fields(B, C, H, W, 2);
  ForecastMetrics m(std::vector<double>(size_t(H), 0.0), C, W);
  CHECK_CLOSE(m.weights(), std::vector<double>(size_t(H), 1.0), 1e-15, 0);
  m.add(pred.data(), tar.data(), nullptr, B);
  const ForecastMetrics::Result r = m.result();
  CHECK(r.samples == B);
  CHECK_CLOSE(r.rmse, plain_rmse(pred, tar, B, C, H * W), 1e-12, 1e-12);
  CHECK(r.rmse_persistence.empty());
  CHECK(r.acc_persistence.empty());
}

TEST_CASE("forecast metrics: a perfect forecast has RMSE 0 and ACC 1, an inverted one ACC -1", "[models][metrics]") {
  const int64_t B = 2, C = 2, H = 3, W = 4;
  const std::vector<double> lat{50, 10, -30};
  const std::vector<float> tar = fields(B, C, H, W, 3), clim = fields(1, C, H, W, 4);
  ForecastMetrics same(lat, C, W, clim);
  same.add(tar.data(), tar.data(), nullptr, B);
  CHECK_CLOSE(same.result().rmse, (std::vector<double>{0, 0}), 1e-15, 0);
  CHECK_CLOSE(same.result().acc, (std::vector<double>{1, 1}), 1e-12, 0);

  // pred - clim = -2 (tar - clim): perfectly anti-correlated anomalies.
  std::vector<float> inverted(tar.size());
  for (size_t k = 0; k < tar.size(); ++k) {
    const float cl = clim[k % size_t(C * H * W)];
    inverted[k] = cl - 2 * (tar[k] - cl);
  }
  ForecastMetrics inv(lat, C, W, clim);
  inv.add(inverted.data(), tar.data(), nullptr, B);
  CHECK_CLOSE(inv.result().acc, (std::vector<double>{-1, -1}), 1e-6, 0);

  // A target equal to the climatology has no anomaly: ACC counts 0, not NaN.
  ForecastMetrics zero(lat, C, W, clim);
  zero.add(tar.data(), clim.data(), nullptr, 1);
  CHECK_CLOSE(zero.result().acc, (std::vector<double>{0, 0}), 0, 0);
}

TEST_CASE("forecast metrics: a 2 x 2 case worked by hand", "[models][metrics]") {
  // Latitudes {60, 0}: cos = 0.5, 1, mean 0.75, so w = 2/3 (row 0), 4/3 (row 1).
  // pred = [1 2; 3 4], tar = [0 2; 1 1]: errors [1 0; 2 3].
  //   RMSE = sqrt((2/3 (1 + 0) + 4/3 (4 + 9)) / 4) = sqrt(18 / 4) = sqrt(4.5).
  // No climatology (anomalies are the fields):
  //   sum w a t  = 2/3 (0 + 4) + 4/3 (3 + 4) = 8/3 + 28/3 = 12
  //   sum w a^2  = 2/3 (1 + 4) + 4/3 (9 + 16) = 110/3
  //   sum w t^2  = 2/3 (0 + 4) + 4/3 (1 + 1) = 16/3
  //   ACC = 12 / sqrt(110/3 * 16/3) = 36 / (4 sqrt(110)) = 9 / sqrt(110).
  // Climatology [0 1; 2 1]: a = [1 1; 1 3], t = [0 1; -1 0]:
  //   sum w a t = 2/3 (0 + 1) + 4/3 (-1 + 0) = -2/3
  //   sum w a^2 = 2/3 (1 + 1) + 4/3 (1 + 9) = 44/3;  sum w t^2 = 2/3 + 4/3 = 2
  //   ACC = (-2/3) / sqrt(88/3) = -2 / sqrt(264) = -1 / sqrt(66); RMSE as above.
  const std::vector<double> lat{60, 0};
  const std::vector<float> pred{1, 2, 3, 4}, tar{0, 2, 1, 1};
  ForecastMetrics m(lat, 1, 2);
  CHECK_CLOSE(m.weights(), (std::vector<double>{2.0 / 3, 4.0 / 3}), 1e-15, 1e-15);
  m.add(pred.data(), tar.data(), nullptr, 1);
  CHECK_CLOSE(m.result().rmse, std::vector<double>{std::sqrt(4.5)}, 0, 1e-14);
  CHECK_CLOSE(m.result().acc, std::vector<double>{9 / std::sqrt(110.0)}, 0, 1e-14);

  ForecastMetrics mc(lat, 1, 2, {0, 1, 2, 1});
  mc.add(pred.data(), tar.data(), nullptr, 1);
  CHECK_CLOSE(mc.result().rmse, std::vector<double>{std::sqrt(4.5)}, 0, 1e-14);
  CHECK_CLOSE(mc.result().acc, std::vector<double>{-1 / std::sqrt(66.0)}, 0, 1e-14);
}

TEST_CASE("forecast metrics: sums of two halves equal adding everything (the all-reduce)", "[models][metrics]") {
  const int64_t B = 5, C = 3, H = 4, W = 3, n = C * H * W;
  const std::vector<double> lat{70, 20, -10, -55};
  const std::vector<float> pred = fields(B, C, H, W, 5), tar = fields(B, C, H, W, 6), per = fields(B, C, H, W, 7),
                           clim = fields(1, C, H, W, 8);
  ForecastMetrics whole(lat, C, W, clim), first(lat, C, W, clim), second(lat, C, W, clim);
  whole.add(pred.data(), tar.data(), per.data(), B);
  first.add(pred.data(), tar.data(), per.data(), 2);
  second.add(pred.data() + 2 * n, tar.data() + 2 * n, per.data() + 2 * n, B - 2);
  std::vector<double> s = first.sums();
  const std::vector<double> s2 = second.sums();
  REQUIRE(s.size() == s2.size());
  for (size_t k = 0; k < s.size(); ++k) s[k] += s2[k];  // what the all-reduce does
  first.set_sums(s);
  const ForecastMetrics::Result a = first.result(), b = whole.result();
  CHECK(a.samples == B);
  CHECK_CLOSE(a.rmse, b.rmse, 1e-14, 1e-12);
  CHECK_CLOSE(a.acc, b.acc, 1e-14, 1e-12);
  CHECK_CLOSE(a.rmse_persistence, b.rmse_persistence, 1e-14, 1e-12);
  CHECK_CLOSE(a.acc_persistence, b.acc_persistence, 1e-14, 1e-12);
  CHECK_THROWS_WITH(first.set_sums({1, 2, 3}), Contains("3 sums, expected 14"));
}

TEST_CASE("forecast metrics: persistence metrics come from the third array", "[models][metrics]") {
  const int64_t B = 2, C = 2, H = 3, W = 4;
  const std::vector<double> lat(size_t(H), 0.0);
  const std::vector<float> pred = fields(B, C, H, W, 9), tar = fields(B, C, H, W, 10), per = fields(B, C, H, W, 11),
                           clim = fields(1, C, H, W, 12);
  ForecastMetrics m(lat, C, W, clim), per_as_pred(lat, C, W, clim);
  m.add(pred.data(), tar.data(), per.data(), B);
  per_as_pred.add(per.data(), tar.data(), nullptr, B);
  const ForecastMetrics::Result r = m.result(), p = per_as_pred.result();
  CHECK_CLOSE(r.rmse, plain_rmse(pred, tar, B, C, H * W), 1e-12, 1e-12);
  CHECK_CLOSE(r.rmse_persistence, plain_rmse(per, tar, B, C, H * W), 1e-12, 1e-12);
  CHECK_CLOSE(r.acc_persistence, p.acc, 1e-15, 0);
  // The persistence metrics differ from the model's: nothing was mixed up.
  CHECK(std::abs(r.acc_persistence[0] - r.acc[0]) > 1e-3);
}
