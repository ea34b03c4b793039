// PyTorch parity for the dense ops: matmul (every layout and transpose, with
// and without bias), linear, add/sub/mul/scale, gelu and relu. Forward and
// every input gradient are compared with torch results committed in
// tests/fixtures/parity_*.safetensors (regenerate: scripts/make_fixtures.py).
// Shapes are deliberately awkward: 1-row and T=1 cases, sizes 3, 5, 7, 13, 37.
// Tolerances: kAtol 1e-5 / kRtol 1e-4 (tests/parity_util.h) unless a case says why not.
#include "engine/ops.h"
#include "tests/parity_util.h"

using namespace eng;
using namespace eng::test;

namespace {
Trans trans(int t) { return t ? Trans::T : Trans::N; }
}  // namespace

TEST_CASE("parity: matmul (2-D, batched, shared B, all transposes, bias)", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_matmul.safetensors");
  for_each_case(f, -1, [](const ParityCase& c) {
    Tensor a = c.input("a"), b = c.input("b");
    Tensor bias = c.has("bias") ? c.input("bias") : Tensor();
    const std::vector<int> cfg = c.ints("cfg");
    Tensor y = matmul(a, b, trans(cfg.at(0)), trans(cfg.at(1)), bias);
    // K is at most 37 and the products are O(1): float32 dot-product error
    // stays ~1e-6, within the defaults.
    c.check(y, {{"a", a}, {"b", b}, {"bias", bias}});
  });
}

TEST_CASE("parity: linear", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_linear.safetensors");
  for_each_case(f, -1, [](const ParityCase& c) {
    Tensor x = c.input("x"), w = c.input("w");
    Tensor b = c.has("b") ? c.input("b") : Tensor();
    c.check(linear(x, w, b), {{"x", x}, {"w", w}, {"b", b}});
  });
}

// Op codes of parity_elementwise (see elementwise_fixture in the script).
enum { kAdd = 0, kSub = 1, kMul = 2, kScale = 3 };

TEST_CASE("parity: add", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_elementwise.safetensors");
  for_each_case(f, kAdd, [](const ParityCase& c) {
    Tensor a = c.input("a"), b = c.input("b");
    c.check(add(a, b), {{"a", a}, {"b", b}});
  });
}

TEST_CASE("parity: sub", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_elementwise.safetensors");
  for_each_case(f, kSub, [](const ParityCase& c) {
    Tensor a = c.input("a"), b = c.input("b");
    c.check(sub(a, b), {{"a", a}, {"b", b}});
  });
}

TEST_CASE("parity: mul", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_elementwise.safetensors");
  for_each_case(f, kMul, [](const ParityCase& c) {
    Tensor a = c.input("a"), b = c.input("b");
    c.check(mul(a, b), {{"a", a}, {"b", b}});
  });
}

TEST_CASE("parity: scale", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_elementwise.safetensors");
  for_each_case(f, kScale, [](const ParityCase& c) {
    Tensor x = c.input("x");
    const double s = values(c.ref("s")).at(0);  // stored as f64, so exactly torch's factor
    c.check(scale(x, s), {{"x", x}});
  });
}

TEST_CASE("parity: gelu (tanh approximation)", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_activation.safetensors");
  for_each_case(f, 0, [](const ParityCase& c) {
    Tensor x = c.input("x");
    // Inputs span about +-9, so tanh saturates and its derivative is tiny:
    // float32 tanh/pow rounding gives ~1e-6 absolute, inside the defaults.
    c.check(gelu(x), {{"x", x}});
  });
}

TEST_CASE("parity: relu", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_activation.safetensors");
  for_each_case(f, 1, [](const ParityCase& c) {
    Tensor x = c.input("x");
    c.check(relu(x), {{"x", x}});
  });
}
