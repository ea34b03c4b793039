// PyTorch parity for the layout and reduction ops: permute, transpose,
// sum/mean (everything or one dim, with and without keepdim), concat and
// split. Forward and input gradients are compared with torch results in
// tests/fixtures/parity_*.safetensors (regenerate: scripts/make_fixtures.py).
// Tolerances: kAtol 1e-5 / kRtol 1e-4 (tests/parity_util.h); the copies are
// exact, the reductions sum at most 273 float32 values.
#include "engine/ops.h"
#include "tests/parity_util.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("parity: permute", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_layout.safetensors");
  for_each_case(f, 0, [](const ParityCase& c) {
    Tensor x = c.input("x");
    c.check(permute(x, c.ints("dims")), {{"x", x}});
  });
}

TEST_CASE("parity: transpose", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_layout.safetensors");
  for_each_case(f, 1, [](const ParityCase& c) {
    Tensor x = c.input("x");
    const std::vector<int> d = c.ints("dims");
    c.check(transpose(x, d.at(0), d.at(1)), {{"x", x}});
  });
}

namespace {
// parity_reduce: op 0 = sum, 1 = mean; cfg = (dim, keepdim), dim -99 = all.
void check_reduce(int op, bool all) {
  const SafetensorsFile f = load_fixture("parity_reduce.safetensors");
  int matched = 0;
  for_each_case(f, op, [&](const ParityCase& c) {
    const std::vector<int> cfg = c.ints("cfg");
    if ((cfg.at(0) == -99) != all) return;
    ++matched;
    Tensor x = c.input("x");
    Tensor y = all ? (op == 0 ? sum(x) : mean(x))
                   : (op == 0 ? sum(x, cfg.at(0), cfg.at(1) != 0) : mean(x, cfg.at(0), cfg.at(1) != 0));
    c.check(y, {{"x", x}});
  });
  CHECK(matched > 0);
}
}  // namespace

TEST_CASE("parity: sum (all elements)", "[parity]") { check_reduce(0, true); }
TEST_CASE("parity: mean (all elements)", "[parity]") { check_reduce(1, true); }
TEST_CASE("parity: sum along a dim (keepdim or not)", "[parity]") { check_reduce(0, false); }
TEST_CASE("parity: mean along a dim (keepdim or not)", "[parity]") { check_reduce(1, false); }

TEST_CASE("parity: concat", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_concat_split.safetensors");
  for_each_case(f, 0, [](const ParityCase& c) {
    std::vector<Tensor> xs;
    std::vector<std::pair<std::string, Tensor>> named;
    for (int i = 0; c.has(cat("x", i)); ++i) {
      xs.push_back(c.input(cat("x", i)));
      named.emplace_back(cat("x", i), xs.back());
    }
    REQUIRE(!xs.empty());
    c.check(concat(xs, c.ints("cfg").at(0)), named);
  });
}

TEST_CASE("parity: split (a gradient for every piece)", "[parity]") {
  const SafetensorsFile f = load_fixture("parity_concat_split.safetensors");
  for_each_case(f, 1, [](const ParityCase& c) {
    Tensor x = c.input("x");
    std::vector<int64_t> sizes;
    for (int s : c.ints("sizes")) sizes.push_back(s);
    const std::vector<Tensor> ys = split(x, sizes, c.ints("cfg").at(0));
    REQUIRE(ys.size() == sizes.size());
    // torch ran backward over all pieces at once; each piece is its own node
    // here, so one backward per piece accumulates the same sum into x.grad.
    for (size_t j = 0; j < ys.size(); ++j) {
      ys[j].backward(c.ref(cat("gout", j)).clone());
      check_close(cat("forward piece ", j), ys[j], c.ref(cat("out", j)));
    }
    c.check_grads({{"x", x}});
  });
}
