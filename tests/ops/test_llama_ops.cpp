// The Llama block's ops on the cpu (f64): rmsnorm, add_rmsnorm, swiglu,
// rope_table and rope_. Each forward against the formula written out here
// element by element (not the kernels' loops), each backward by central
// differences (gradcheck), and the errors a caller can make.
#include <cmath>

#include "tests/test_util.h"

using namespace eng;
using test::leaf;
using Inputs = std::vector<Tensor>;

namespace {
// The frequencies of a head of HS, in double, with Llama 3's smoothing when
// factor > 0 (Meta's apply_scaling, as the Llama 3.1 reference code writes it).
std::vector<double> inv_freq(int64_t HS, const RopeOptions& o) {
  std::vector<double> f;
  for (int64_t i = 0; i < HS / 2; ++i) {
    const double v = std::pow(o.theta, -double(2 * i) / double(HS));
    if (o.factor <= 0) {
      f.push_back(v);
      continue;
    }
    const double wavelen = 2 * M_PI / v, lo = double(o.original_max_positions) / o.low_freq_factor,
                 hi = double(o.original_max_positions) / o.high_freq_factor;
    if (wavelen < hi) {
      f.push_back(v);
    } else if (wavelen > lo) {
      f.push_back(v / o.factor);
    } else {
      const double s =
          (double(o.original_max_positions) / wavelen - o.low_freq_factor) / (o.high_freq_factor - o.low_freq_factor);
      f.push_back((1 - s) * v / o.factor + s * v);
    }
  }
  return f;
}
}  // namespace

TEST_CASE("rmsnorm: x / sqrt(mean(x^2) + eps) * w, row by row", "[llama_ops]") {
  const Tensor x = leaf({3, 7}, 1), w = leaf({7}, 2);
  const double eps = 1e-5;
  const std::vector<double> xv = test::values(x), wv = test::values(w);
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    double q = 0;
    for (int c = 0; c < 7; ++c) q += xv[r * 7 + c] * xv[r * 7 + c];
    const double s = 1 / std::sqrt(q / 7 + eps);
    for (int c = 0; c < 7; ++c) want.push_back(xv[r * 7 + c] * s * wv[c]);
  }
  CHECK_CLOSE(test::values(rmsnorm(x, w, eps)), want, 1e-12, 1e-12);
  const auto [sum, normed] = add_rmsnorm(x, x, w, eps);
  CHECK_CLOSE(test::values(sum), test::values(scale(x, 2.0)), 0, 0);
  CHECK_CLOSE(test::values(normed), test::values(rmsnorm(scale(x, 2.0), w, eps)), 1e-12, 1e-12);
}

TEST_CASE("gradcheck: rmsnorm and add_rmsnorm with respect to every input", "[gradcheck][llama_ops]") {
  for (int64_t C : {1, 5, 70}) {
    INFO("C " << C);
    CHECK_GRADCHECK([](const Inputs& x) { return rmsnorm(x[0], x[1]); }, {leaf({3, C}, 3), leaf({C}, 4)});
  }
  CHECK_GRADCHECK([](const Inputs& x) { return rmsnorm(x[0], x[1], 0.5); }, {leaf({2, 2, 4}, 5), leaf({4}, 6)});
  // Both outputs used, as a block uses them: the residual stream goes on, the
  // normed values feed the next layer.
  CHECK_GRADCHECK(
      [](const Inputs& x) {
        const auto [s, n] = add_rmsnorm(x[0], x[1], x[2]);
        return add(mul(s, s), n);
      },
      {leaf({4, 6}, 7), leaf({4, 6}, 8), leaf({6}, 9)});
}

TEST_CASE("swiglu: silu(gate) * up over the packed [gate | up] rows", "[llama_ops]") {
  const Tensor gu = leaf({2, 3, 8}, 10, 2.f);
  const std::vector<double> v = test::values(gu);
  std::vector<double> want;
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c) {
      const double g = v[r * 8 + c], u = v[r * 8 + 4 + c];
      want.push_back(g / (1 + std::exp(-g)) * u);
    }
  const Tensor out = swiglu(gu);
  CHECK(out.shape() == Shape{2, 3, 4});
  CHECK_CLOSE(test::values(out), want, 1e-14, 1e-14);
  CHECK_GRADCHECK([](const Inputs& x) { return swiglu(x[0]); }, {leaf({5, 6}, 11, 2.f)});
  CHECK_THROWS_WITH(swiglu(leaf({2, 3}, 12)), Catch::Contains("gate | up"));
}

TEST_CASE("rope_table: cos and sin of t * theta^(-2i/HS), with and without Llama 3's scaling", "[llama_ops]") {
  RopeOptions plain;
  plain.theta = 500000;
  RopeOptions llama3 = plain;
  llama3.factor = 8, llama3.low_freq_factor = 1, llama3.high_freq_factor = 4, llama3.original_max_positions = 64;
  for (const RopeOptions& o : {RopeOptions{}, plain, llama3}) {
    const int64_t P = 300, HS = 16;
    const Tensor table = rope_table(P, HS, o, kCPU);
    const std::vector<double> f = inv_freq(HS, o), got = test::values(table);
    std::vector<double> want;
    for (int64_t t = 0; t < P; ++t) {
      for (double v : f) want.push_back(std::cos(double(t) * v));
      for (double v : f) want.push_back(std::sin(double(t) * v));
    }
    // fp32 frequencies and angles: at t = 300 an angle is off by ~300 x 2^-24 rad.
    INFO("theta " << o.theta << " factor " << o.factor);
    CHECK_CLOSE(got, want, 4e-5, 0);
  }
  // With a short original context every band is hit: high frequencies kept,
  // low ones divided by factor, the middle smoothed.
  const std::vector<double> f = inv_freq(16, llama3), g = inv_freq(16, plain);
  CHECK(f.front() == g.front());
  CHECK(std::fabs(f.back() - g.back() / 8) < 1e-15);
  bool smoothed = false;
  for (size_t i = 0; i < f.size(); ++i) smoothed |= f[i] != g[i] && std::fabs(f[i] - g[i] / 8) > 1e-12 * g[i];
  CHECK(smoothed);
  RopeOptions bad;
  bad.factor = 8, bad.high_freq_factor = 0.5;
  CHECK_THROWS_WITH(rope_table(4, 8, bad, kCPU), Catch::Contains("low_freq_factor < high_freq_factor"));
  CHECK_THROWS_WITH(rope_table(4, 7, RopeOptions{}, kCPU), Catch::Contains("head size 7"));
}

TEST_CASE("rope_: turns the q and k heads of a packed qkv in place, pair i with pair i + HS/2", "[llama_ops]") {
  const int64_t B = 2, T = 5, NH = 2, NKV = 1, HS = 6, W = (NH + 2 * NKV) * HS, off = 3;
  const Tensor table = rope_table(16, HS, RopeOptions{}, kCPU);
  const Tensor x = leaf({B, T, W}, 13);
  const std::vector<double> xv = test::values(x), tv = test::values(table);
  Tensor y = rope_(scale(x, 1.0), table, NH + NKV, off);
  std::vector<double> want = xv;  // v's head unchanged
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t h = 0; h < NH + NKV; ++h)
      for (int64_t i = 0; i < HS / 2; ++i) {
        const int64_t p = off + bt % T, e = bt * W + h * HS + i;
        const double c = tv[p * HS + i], s = tv[p * HS + HS / 2 + i];
        want[e] = xv[e] * c - xv[e + HS / 2] * s;
        want[e + HS / 2] = xv[e + HS / 2] * c + xv[e] * s;
      }
  CHECK_CLOSE(test::values(y), want, 1e-15, 1e-15);
  // In place: the input's storage holds the turned values.
  Tensor z = scale(x, 1.0);
  const Tensor turned = rope_(z, table, NH + NKV, off);
  CHECK(turned.data_ptr() == z.data_ptr());
  CHECK_GRADCHECK([&](const Inputs& in) { return rope_(scale(in[0], 1.0), table, NH + NKV, off); },
                  {leaf({B, T, W}, 14)});
  // (B, T, heads, HS) as well: one of two heads turned.
  const Tensor table4 = rope_table(3, 4, RopeOptions{}, kCPU);
  CHECK_GRADCHECK([&](const Inputs& in) { return rope_(scale(in[0], 1.0), table4, 1); }, {leaf({1, 3, 2, 4}, 15)});
}

TEST_CASE("rope_: bad calls are one line naming what to change", "[llama_ops]") {
  const Tensor table = rope_table(8, 4, RopeOptions{}, kCPU);
  CHECK_THROWS_WITH(rope_(leaf({1, 4, 8}, 1), table, 2), Catch::Contains("leaf that requires grad"));
  CHECK_THROWS_WITH(rope_(Tensor::zeros({1, 4, 8}, DType::f64), table, 3), Catch::Contains("3 heads of 4"));
  CHECK_THROWS_WITH(rope_(Tensor::zeros({1, 4, 8}, DType::f64), table, 2, 5), Catch::Contains("beyond the table's 8"));
  CHECK_THROWS_WITH(rope_(Tensor::zeros({1, 4, 8}, DType::f64), table.to(DType::f64), 2),
                    Catch::Contains("must be fp32"));
}
