// Test helpers: tolerance comparison and finite-difference gradient checks.
// Pass rule (the project's one tolerance rule): |x - ref| <= atol + rtol * |ref| for every element;
// a failure reports the first offending index and both values.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/rng.h"

namespace eng::test {

// Returns "" when close, else a message naming the first bad element.
inline std::string compare(const std::vector<double>& x, const std::vector<double>& ref, double atol, double rtol) {
  if (x.size() != ref.size()) return cat("size ", x.size(), " vs reference ", ref.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double tol = atol + rtol * std::fabs(ref[i]);
    if (!(std::fabs(x[i] - ref[i]) <= tol))  // also catches NaN
      return cat("element ", i, ": ", x[i], " vs reference ", ref[i], " (tol ", tol, ")");
  }
  return "";
}

#define CHECK_CLOSE(x, ref, atol, rtol)                                        \
  do {                                                                         \
    const std::string msg_ = ::eng::test::compare((x), (ref), (atol), (rtol)); \
    INFO(msg_);                                                                \
    CHECK(msg_.empty());                                                       \
  } while (0)

inline std::vector<double> values(const Tensor& t) { return t.to_f64_vector(); }

// Central-difference gradient check in double precision. f maps the inputs to
// any tensor; the check uses the scalar L = sum(f(x) * w) with fixed random w,
// so every output element contributes. Inputs must be f64 leaves; those with
// requires_grad are checked. Returns "" on success.
inline std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs,
                             double eps = 1e-6, double atol = 1e-6, double rtol = 1e-5) {
  for (Tensor& x : inputs) x.zero_grad();
  Tensor y = f(inputs);
  const Tensor w = Tensor::randn(y.shape(), 1234, 1.0f, DType::f64);
  y.backward(w);
  const std::vector<double> wv = values(w);
  auto loss = [&]() {
    NoGradGuard ng;
    std::vector<double> yv = values(f(inputs));
    double s = 0;
    for (size_t i = 0; i < yv.size(); ++i) s += yv[i] * wv[i];
    return s;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    if (!x.grad().defined()) return cat("input ", k, ": no gradient was produced");
    const std::vector<double> analytic = values(x.grad());
    double* p = x.data<double>();
    std::vector<double> numeric(analytic.size());
    for (size_t i = 0; i < numeric.size(); ++i) {
      const double orig = p[i];
      p[i] = orig + eps;
      const double lp = loss();
      p[i] = orig - eps;
      const double lm = loss();
      p[i] = orig;
      numeric[i] = (lp - lm) / (2 * eps);
    }
    const std::string msg = compare(analytic, numeric, atol, rtol);
    if (!msg.empty()) return cat("input ", k, ": ", msg);
  }
  return "";
}

#define CHECK_GRADCHECK(...)                                      \
  do {                                                            \
    const std::string msg_ = ::eng::test::gradcheck(__VA_ARGS__); \
    INFO(msg_);                                                   \
    CHECK(msg_.empty());                                          \
  } while (0)

// (B, T) i32 token ids, uniform in [0, V), from `seed`.
inline Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed, Device dev = kCPU) {
  std::vector<int32_t> v(size_t(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(rng::bits(seed, i) % uint64_t(V));
  return Tensor::from_ints(v, {B, T}, dev);
}

// An f64 leaf with N(0, std) values from `seed`.
inline Tensor leaf(const Shape& s, uint64_t seed, float std = 1.f) {
  return Tensor::randn(s, seed, std, DType::f64).set_requires_grad(true);
}

// Two copies of one model (the same seed) after backward: every parameter of
// `got` (on any device) has a gradient, on its own device, equal to `ref`'s.
inline void check_same_grads(const Module& ref, const Module& got, double atol, double rtol) {
  const auto pr = ref.named_parameters(), pg = got.named_parameters();
  REQUIRE(pr.size() == pg.size());
  for (size_t i = 0; i < pr.size(); ++i) {
    INFO(pr[i].first);
    const Tensor& g = pg[i].second.grad();
    REQUIRE(g.defined());
    CHECK(g.device() == pg[i].second.device());
    CHECK_CLOSE(values(g.to(kCPU)), values(pr[i].second.grad()), atol, rtol);
  }
}

}  // namespace eng::test
