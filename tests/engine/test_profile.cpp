// The profiler's ranges (engine/profile.h) through the host-side range log:
// they nest and close, layers show in forward and (in reverse) in backward,
// also under activation checkpointing; events hold the wall-clock time they
// happened; the nesting check itself catches a stray pop and an unclosed
// range; and the --profile_steps window parser.
#include <chrono>

#include "engine/ops.h"
#include "engine/profile.h"
#include "models/gpt2/gpt2.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::profile;

namespace {

// Collects the log of everything f does.
template <typename F>
std::vector<RangeEvent> logged(F f) {
  std::vector<RangeEvent> log;
  set_range_log(&log);
  try {
    f();
  } catch (...) {
    set_range_log(nullptr);
    throw;
  }
  set_range_log(nullptr);
  return log;
}

// The position of the first push of `name`, or -1.
int first_push(const std::vector<RangeEvent>& log, const std::string& name) {
  for (size_t i = 0; i < log.size(); ++i)
    if (log[i].push && log[i].name == name) return int(i);
  return -1;
}

std::vector<RangeEvent> gpt2_step_log(models::Recompute recompute) {
  models::GPT2Config c;
  c.n_layer = 3, c.n_head = 2, c.n_embd = 16, c.block_size = 8, c.vocab_size = 32;
  const models::GPT2 model(c, 7);
  const Tensor ids = Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  const Tensor targets = Tensor::from_ints({2, 3, 4, 5, 6, 7, 8, 9}, {2, 4});
  return logged([&] {
    const Range step("step 1");
    Tensor loss;
    {
      const Range r("forward");
      loss = model.loss(ids, targets, recompute);
    }
    const Range r("backward");
    loss.backward();
  });
}

}  // namespace

TEST_CASE("profile: a GPT-2 step's ranges nest and close, layers forward and backward", "[profile]") {
  for (models::Recompute rc : {models::Recompute::no, models::Recompute::yes}) {
    INFO((rc == models::Recompute::yes ? "recompute" : "no recompute"));
    const std::vector<RangeEvent> log = gpt2_step_log(rc);
    CHECK(check_nesting(log) == "");
    for (const char* name :
         {"step 1", "forward", "backward", "embeddings", "h.0", "h.1", "h.2", "lm_head", "loss", "loss backward",
          "lm_head backward", "h.2 backward", "h.1 backward", "h.0 backward", "embeddings backward"})
      CHECK(first_push(log, name) >= 0);
    // Forward runs the layers in order, backward in reverse.
    CHECK(first_push(log, "h.0") < first_push(log, "h.1"));
    CHECK(first_push(log, "h.1") < first_push(log, "h.2"));
    CHECK(first_push(log, "h.2 backward") < first_push(log, "h.1 backward"));
    CHECK(first_push(log, "h.1 backward") < first_push(log, "h.0 backward"));
    // Every layer backward range opens inside "backward".
    CHECK(first_push(log, "backward") < first_push(log, "loss backward"));
    if (rc == models::Recompute::yes) {
      // The recompute runs each block's forward again, inside its backward range.
      int second = -1, seen = 0;
      for (size_t i = 0; i < log.size(); ++i)
        if (log[i].push && log[i].name == "h.1" && ++seen == 2) second = int(i);
      CHECK(seen == 2);
      CHECK(second > first_push(log, "h.1 backward"));
    }
  }
}

TEST_CASE("profile: ranges are recorded only while a log (or NVTX) is on", "[profile]") {
  CHECK_FALSE(nvtx_enabled());
  std::vector<RangeEvent> log;
  const auto now_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t t0 = now_us();
  {
    const Range before("before");  // opened with nothing listening: stays closed
    set_range_log(&log);
    const Range inside("inside");
  }
  set_range_log(nullptr);
  const int64_t t1 = now_us();
  REQUIRE(log.size() == 2);
  CHECK(log[0].push);
  CHECK(log[0].name == "inside");
  CHECK_FALSE(log[1].push);
  CHECK(check_nesting(log) == "");
  // Each event holds the wall-clock time it happened (scripts/plot.py timeline
  // lines up the ranks on it), not the time the log is read.
  CHECK(t0 <= log[0].time_us);
  CHECK(log[0].time_us <= log[1].time_us);
  CHECK(log[1].time_us <= t1);
}

TEST_CASE("profile: the nesting check finds a stray pop and an unclosed range", "[profile]") {
  CHECK(check_nesting({{true, "a"}, {false, ""}, {false, ""}}) == "event 2: a pop with no open range");
  CHECK(check_nesting({{true, "a"}, {true, "b"}, {false, ""}}) == "1 range(s) left open, the innermost 'a'");
  CHECK(check_nesting({}) == "");
}

TEST_CASE("profile: --profile_steps windows", "[profile]") {
  const StepWindow w = parse_step_window("3:5", 10, "profile_steps");
  CHECK(w.first == 3);
  CHECK(w.last == 5);
  CHECK(parse_step_window("7:7", 7, "x").last == 7);
  CHECK(parse_step_window("", 10, "x").empty());
  for (const char* bad : {"5", "3-5", "5:3", "0:2", "2:11", "a:b", ":3", "3:", "-1:2", "2:3:4", " 2:3"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_step_window(bad, 10, "profile_steps"),
                      Catch::Matchers::Contains(std::string("profile_steps '") + bad + "': expected A:B"));
  }
}
