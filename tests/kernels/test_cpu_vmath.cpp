// kernels/cpu/vmath.cpp (libmvec's vector expf and tanhf in the cpu kernels'
// fp32 rows) against the scalar math it replaced: glibc's expf for the exp rows,
// within 4 ulp (vmath.h says why 4), over the whole float range of exp
// (underflow to 0 and overflow to inf included); the GELUs against their
// formula in double. The kernels that call them keep their own tests
// (softmax, attention, cross-entropy, GELU against references and gradchecks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/vmath.h"
#include "tests/test_util.h"

using namespace eng;

namespace {
// The distance in units in the last place between two finite or infinite floats of one sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return ia > ib ? int64_t(ia) - ib : int64_t(ib) - ia;
}
}  // namespace

TEST_CASE("cpu vmath: vector expf within 4 ulp of glibc's expf, sums and scaling", "[kernels][cpu]") {
  // -104 .. 89 in steps that hit many mantissas: exp underflows to 0 below
  // ~-103.3 and overflows to inf above ~88.7. Odd n: a ragged vector tail.
  std::vector<float> x;
  for (double v = -104.0; v <= 89.0; v += 0.0123) x.push_back(float(v));
  if (x.size() % 2 == 0) x.push_back(0.5f);
  const int64_t n = int64_t(x.size());
  for (float shift : {0.f, 3.5f, -20.f}) {
    INFO("shift " << shift);
    std::vector<float> y(x.size());
    const float s = cpu::exp_shift_sum(x.data(), y.data(), n, shift);
    int64_t worst = 0;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = std::exp(x[size_t(i)] - shift);
      worst = std::max(worst, ulps(y[size_t(i)], want));
      sum += double(y[size_t(i)]);
    }
    CHECK(worst <= 4);
    if (sum < 0.999 * double(std::numeric_limits<float>::max())) {
      CHECK(std::fabs(double(s) - sum) <= 1e-5 * sum);  // lanes' order vs one double sum
      CHECK(std::fabs(double(cpu::sum_exp_shift(x.data(), n, shift)) - sum) <= 1e-5 * sum);
    } else {
      CHECK(std::isinf(s));  // past float's range the sum overflows, as the scalar loop's did
    }
    // Scaled by a power of two, exact: within 4 ulp of -0.25 expf as well.
    std::vector<float> z(x.size());
    cpu::scaled_exp_shift(x.data(), z.data(), n, shift, -0.25f);
    worst = 0;
    for (int64_t i = 0; i < n; ++i)
      worst = std::max(worst, ulps(z[size_t(i)], -0.25f * std::exp(x[size_t(i)] - shift)));
    CHECK(worst <= 4);
  }
  // In place (softmax rows of attention).
  std::vector<float> row{1.f, 2.f, 3.f};
  const float s = cpu::exp_shift_sum(row.data(), row.data(), 3, 3.f);
  CHECK(ulps(row[0], std::exp(-2.f)) <= 4);
  CHECK(row[2] == 1.f);
  CHECK(std::fabs(s - (std::exp(-2.f) + std::exp(-1.f) + 1.f)) <= 1e-6f);
  const std::string isa = cpu::vmath_isa();
  CHECK((isa == "avx512f" || isa == "avx2" || isa == "sse2" || isa == "scalar"));
}

TEST_CASE("cpu vmath: vector GELU forward and backward follow the formula in double", "[kernels][cpu]") {
  std::vector<float> x;
  for (double v = -12.0; v <= 12.0; v += 0.00731) x.push_back(float(v));
  for (float v : {-100.f, -30.f, 0.f, 30.f, 100.f, 1e-30f}) x.push_back(v);  // saturated tanh, tiny
  const int64_t n = int64_t(x.size());
  std::vector<float> dout(x.size()), out(x.size()), dx(x.size());
  for (int64_t i = 0; i < n; ++i) dout[size_t(i)] = float(1.0 + 0.5 * std::sin(double(i)));
  cpu::gelu_forward_f32(x.data(), out.data(), n);
  cpu::gelu_backward_f32(x.data(), dout.data(), dx.data(), n);
  const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[size_t(i)], u = c * (xi + k * xi * xi * xi), th = std::tanh(u);
    const double f = 0.5 * xi * (1 + th);
    const double g = (0.5 * (1 + th) + 0.5 * xi * (1 - th * th) * c * (1 + 3 * k * xi * xi)) * dout[size_t(i)];
    INFO("x = " << xi);
    CHECK(std::fabs(out[size_t(i)] - f) <= 2e-6 * (1 + std::fabs(xi)));
    CHECK(std::fabs(dx[size_t(i)] - g) <= 4e-6 * (1 + std::fabs(g)));
  }
}

TEST_CASE("cpu vmath: every length's last n % 16 values (n 0 to 40), nothing written past n", "[kernels][cpu]") {
  // The exp rows take their tail through a padded 16-wide buffer (vmath.cpp):
  // lengths 0..40 (every remainder, with and without full vectors before it),
  // each value within 4 ulp of expf, the sum within rounding of a double sum,
  // and the guard values after y[n - 1] untouched.
  const float guard = -7.f;
  for (int64_t n = 0; n <= 40; ++n) {  // 0: nothing read or written, sum 0
    INFO("n " << n);
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(0.37 * double(i % 11) - 2.0);
    std::vector<float> y(size_t(n + 16), guard), z(size_t(n + 16), guard);
    const float s = cpu::exp_shift_sum(x.data(), y.data(), n, 0.5f);
    cpu::scaled_exp_shift(x.data(), z.data(), n, 0.5f, 2.f);
    double sum = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = std::exp(x[size_t(i)] - 0.5f);
      worst = std::max({worst, ulps(y[size_t(i)], want), ulps(z[size_t(i)], 2.f * want)});
      sum += double(want);
    }
    CHECK(worst <= 4);
    CHECK(std::fabs(double(s) - sum) <= 1e-6 * sum);
    CHECK(std::fabs(double(cpu::sum_exp_shift(x.data(), n, 0.5f)) - sum) <= 1e-6 * sum);
    CHECK(std::all_of(y.begin() + n, y.end(), [&](float v) { return v == guard; }));
    CHECK(std::all_of(z.begin() + n, z.end(), [&](float v) { return v == guard; }));
    std::vector<float> row = x;  // in place, as attention's rows
    CHECK(cpu::exp_shift_sum(row.data(), row.data(), n, 0.5f) == s);
    CHECK(row == std::vector<float>(y.begin(), y.begin() + n));
  }
}
