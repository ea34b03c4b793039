// The epoch sampler: each kept sample once per epoch across ranks, disjoint
// shards, equal step counts, seeded order, and batches that do not depend on
// how many ranks share a global step.
#include <algorithm>
#include <set>

#include "io/sampler.h"
#include "tests/test_util.h"

using namespace eng;
using Catch::Contains;

namespace {
// Every index a rank reads in one epoch, in reading order.
std::vector<int64_t> rank_epoch(const EpochSampler& s, int64_t epoch, int rank, int64_t accum) {
  std::vector<int64_t> out, buf(size_t(s.micro_batch()));
  for (int64_t step = 0; step < s.steps_per_epoch(); ++step)
    for (int64_t m = 0; m < accum; ++m) {
      s.indices(epoch, step, rank * accum + m, buf.data());
      out.insert(out.end(), buf.begin(), buf.end());
    }
  return out;
}
}  // namespace

TEST_CASE("sampler: every kept sample once per epoch, disjoint across ranks", "[io][sampler]") {
  const int64_t n = 103, B = 4, accum = 2;
  for (int world = 1; world <= 4; ++world) {
    INFO("world " << world);
    const EpochSampler s(n, B, world * accum, 42, Shuffle::yes);
    const int64_t G = B * world * accum;
    CHECK(s.steps_per_epoch() == n / G);
    for (int64_t epoch : {0, 1}) {
      std::multiset<int64_t> seen;
      for (int r = 0; r < world; ++r) {
        const auto idx = rank_epoch(s, epoch, r, accum);
        CHECK(int64_t(idx.size()) == s.steps_per_epoch() * accum * B);  // equal step counts
        seen.insert(idx.begin(), idx.end());
      }
      CHECK(int64_t(seen.size()) == s.steps_per_epoch() * G);  // the ragged tail is dropped
      for (int64_t i : seen) {
        CHECK(seen.count(i) == 1);  // exactly once: shards are disjoint
        CHECK((i >= 0 && i < n));
      }
    }
  }
}

TEST_CASE("sampler: seeded order, a new order each epoch, identity unshuffled", "[io][sampler]") {
  const EpochSampler a(50, 5, 2, 7, Shuffle::yes), b(50, 5, 2, 7, Shuffle::yes), c(50, 5, 2, 8, Shuffle::yes);
  CHECK(a.permutation(0) == b.permutation(0));
  CHECK(a.permutation(3) == b.permutation(3));
  CHECK(a.permutation(0) != a.permutation(1));
  CHECK(a.permutation(0) != c.permutation(0));
  auto p = a.permutation(2);
  std::sort(p.begin(), p.end());
  for (int64_t i = 0; i < 50; ++i) CHECK(p[size_t(i)] == i);  // a permutation
  const EpochSampler plain(50, 5, 2, 7, Shuffle::no);
  std::vector<int64_t> idx(5);
  plain.indices(4, 3, 1, idx.data());
  CHECK(idx == std::vector<int64_t>{35, 36, 37, 38, 39});  // step 3, slot 1: samples 3*10 + 5 ...
}

TEST_CASE("sampler: a global step holds the same samples whatever the rank count", "[io][sampler]") {
  // Global batch 20 as 1 rank x 4 micro-batches, 2 x 2 and 4 x 1.
  const int64_t n = 90, B = 5;
  std::vector<std::vector<int64_t>> per_layout;
  for (int world : {1, 2, 4}) {
    const int64_t accum = 4 / world;
    const EpochSampler s(n, B, world * accum, 3, Shuffle::yes);
    std::vector<int64_t> step1;
    std::vector<int64_t> buf(static_cast<size_t>(B));
    for (int r = 0; r < world; ++r)
      for (int64_t m = 0; m < accum; ++m) {
        s.indices(2, 1, r * accum + m, buf.data());
        step1.insert(step1.end(), buf.begin(), buf.end());
      }
    per_layout.push_back(step1);
  }
  CHECK(per_layout[0] == per_layout[1]);
  CHECK(per_layout[0] == per_layout[2]);
}

TEST_CASE("sampler: positions roll over steps and epochs; bad sizes are errors", "[io][sampler]") {
  SamplePosition p;
  for (int i = 0; i < 7; ++i) p.advance(2, 3);  // 2 micro-batches per step, 3 steps per epoch
  CHECK(p == SamplePosition{1, 0, 1});
  CHECK_THROWS_WITH(EpochSampler(10, 4, 3, 0, Shuffle::yes), Contains("fewer than one global batch of 12"));
  const EpochSampler s(10, 2, 2, 0, Shuffle::yes);
  std::vector<int64_t> buf(2);
  CHECK_THROWS_WITH(s.indices(0, 2, 0, buf.data()), Contains("outside an epoch of 2 steps"));
}
