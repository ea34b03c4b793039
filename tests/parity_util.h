// Helpers for the PyTorch parity tests: read a fixture written by
// scripts/make_fixtures.py (case i stores its tensors under "c<i>.", see the
// script's header) and compare engine results against its references.
// The references come from torch, never from the code under test.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "tests/test_util.h"

namespace eng::test {

// Default fp32 tolerances (|x - ref| <= atol + rtol |ref|). The references are
// computed in float64 and rounded once, so this budgets only the engine's own
// float32 rounding (a few ulps per accumulated term at these sizes).
constexpr double kAtol = 1e-5, kRtol = 1e-4;

inline SafetensorsFile load_fixture(const std::string& file) {
  return load_safetensors(std::string(ENGINE_FIXTURE_DIR) + "/" + file);
}

inline std::vector<int> ints_of(const Tensor& t) {
  std::vector<int> v;
  for (double x : values(t)) v.push_back(int(x));
  return v;
}

// Compares shape and every element; `what` names the tensor in the failure.
inline void check_close(const std::string& what, const Tensor& x, const Tensor& ref, double atol = kAtol,
                        double rtol = kRtol) {
  INFO(what);
  CHECK(x.defined());
  if (!x.defined()) return;
  INFO("engine " << x.desc() << ", reference " << ref.desc());
  CHECK(x.shape() == ref.shape());
  CHECK_CLOSE(values(x), values(ref), atol, rtol);
}

// One case of a parity fixture.
class ParityCase {
 public:
  ParityCase(const SafetensorsFile& f, int i) : f_(&f), p_(cat("c", i, ".")) {}
  std::string desc() const { return f_->metadata.at(p_ + "desc"); }
  bool has(const std::string& name) const { return f_->has(p_ + name); }
  const Tensor& ref(const std::string& name) const { return f_->get(p_ + name); }
  std::vector<int> ints(const std::string& name) const { return ints_of(ref(name)); }
  // A fresh leaf with the fixture's values (a copy, so backward cannot touch the fixture).
  Tensor input(const std::string& name, bool requires_grad = true) const {
    Tensor t = ref(name).clone();
    t.set_requires_grad(requires_grad);
    return t;
  }
  // Runs y.backward(gout), then checks y against "out" and the gradient of
  // every named input against "grad_<name>" (inputs left undefined are skipped).
  void check(const Tensor& y, const std::vector<std::pair<std::string, Tensor>>& inputs, double atol = kAtol,
             double rtol = kRtol) const {
    y.backward(ref("gout").clone());
    check_close("forward output", y, ref("out"), atol, rtol);
    check_grads(inputs, atol, rtol);
  }
  void check_grads(const std::vector<std::pair<std::string, Tensor>>& inputs, double atol = kAtol,
                   double rtol = kRtol) const {
    for (const auto& [name, t] : inputs) {
      if (!t.defined()) continue;
      if (!has("grad_" + name)) {
        FAIL_CHECK("fixture lacks grad_" << name);
        continue;
      }
      check_close("gradient of " + name, t.grad(), ref("grad_" + name), atol, rtol);
    }
  }

 private:
  const SafetensorsFile* f_;
  std::string p_;
};

// Runs body(case) for every case whose "op" code equals `op` (every case when
// op < 0). Fails when none ran, so a fixture that lost an op cannot pass silently.
template <typename Body>
void for_each_case(const SafetensorsFile& f, int op, Body&& body) {
  REQUIRE(f.metadata.count("cases"));
  const int n = std::stoi(f.metadata.at("cases"));
  int ran = 0;
  for (int i = 0; i < n; ++i) {
    const ParityCase c(f, i);
    if (op >= 0 && c.ints("op").at(0) != op) continue;
    INFO(f.path << " case " << i << ": " << c.desc());
    body(c);
    ++ran;
  }
  CHECK(ran > 0);
}

}  // namespace eng::test
