// The learning-rate schedules (engine/optim/schedule.h) at steps worked out
// by hand from the formulas of llm.c's llmc/schedulers.h: lr 1, min_lr 0.1,
// 10 warmup steps, 110 in all (wsd: its decay over the last 20%, from step
// 88 = int(0.8 * 110) as llm.c computes it).
#include <catch2/catch.hpp>

#include <cmath>

#include "base/error.h"
#include "engine/optim/schedule.h"

using namespace eng;

TEST_CASE("lr schedules: warmup, then cosine, linear, constant or warmup-stable-decay", "[optim]") {
  const auto lr = [](LRShape s, int64_t step) { return WarmupDecayLR(s, 1.0, 0.1, 10, 110).lr_at(step); };
  for (LRShape s : {LRShape::cosine, LRShape::linear, LRShape::constant, LRShape::wsd}) {
    INFO(lr_shape_name(s));
    CHECK(lr(s, 0) == Approx(0.1));  // warmup: lr (step + 1) / 10
    CHECK(lr(s, 4) == Approx(0.5));
    CHECK(lr(s, 9) == Approx(1.0));
    CHECK(lr(s, 10) == Approx(1.0));  // the decay's first step is the peak
    CHECK(parse_lr_shape(lr_shape_name(s)) == s);
  }
  // Half-way through the decay (step 60 of 10..110): cosine's coefficient 0.5, linear's 0.5.
  CHECK(lr(LRShape::cosine, 60) == Approx(0.1 + 0.5 * 0.9));
  CHECK(lr(LRShape::cosine, 35) == Approx(0.1 + 0.5 * (1 + std::cos(M_PI / 4)) * 0.9));
  CHECK(lr(LRShape::linear, 35) == Approx(0.1 + 0.75 * 0.9));
  CHECK(lr(LRShape::constant, 100) == 1.0);
  CHECK(lr(LRShape::constant, 500) == 1.0);
  // wsd: stable to step 87, then 1 - sqrt(ratio) over steps 88..110.
  CHECK(lr(LRShape::wsd, 60) == 1.0);
  CHECK(lr(LRShape::wsd, 87) == 1.0);
  CHECK(lr(LRShape::wsd, 88) == Approx(1.0));
  CHECK(lr(LRShape::wsd, 99) == Approx(0.1 + (1 - std::sqrt(0.5)) * 0.9));
  // At and past the end: min_lr.
  for (LRShape s : {LRShape::cosine, LRShape::linear, LRShape::wsd}) {
    CHECK(lr(s, 110) == Approx(0.1));
    CHECK(lr(s, 200) == Approx(0.1));
  }
  // The cosine shape is the warmup + cosine schedule the mlp example runs.
  const WarmupCosineLR cos(1.0, 0.1, 10, 110);
  for (int64_t step = 0; step < 120; ++step) CHECK(lr(LRShape::cosine, step) == Approx(cos.lr_at(step)));
  // A decay fraction longer than the steps after the warmup starts at the warmup's end.
  const WarmupDecayLR all(LRShape::wsd, 1.0, 0.0, 10, 20, 1.0);
  CHECK(all.lr_at(10) == Approx(1.0));
  CHECK(all.lr_at(15) == Approx(1 - std::sqrt(0.5)));
  CHECK_THROWS_WITH(parse_lr_shape("step"), Catch::Contains("cosine, linear, constant or wsd"));
}
