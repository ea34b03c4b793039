// The afab and 1f1b schedules (pipeline_schedule.h).
#include "comm/pipeline_schedule.h"

#include <algorithm>

#include "base/error.h"

namespace eng::comm {

PipeSchedule parse_pipe_schedule(const std::string& s) {
  if (s == "afab") return PipeSchedule::afab;
  if (s == "1f1b") return PipeSchedule::one_f_one_b;
  ENGINE_FAIL("unknown pipeline schedule '", s, "' (expected afab or 1f1b)");
}

const char* pipe_schedule_name(PipeSchedule s) { return s == PipeSchedule::afab ? "afab" : "1f1b"; }

std::vector<PipeOp> pipeline_schedule(PipeSchedule s, int pp, int stage, int64_t m) {
  ENGINE_CHECK(pp >= 1 && stage >= 0 && stage < pp && m >= 1, "pipeline schedule: stage ", stage, " of pp ", pp,
               " with ", m, " micro-batches");
  std::vector<PipeOp> ops;
  // afab is 1f1b with a warm-up of every micro-batch.
  const int64_t warmup = s == PipeSchedule::afab ? m : std::min<int64_t>(pp - stage - 1, m);
  for (int64_t i = 0; i < warmup; ++i) ops.push_back({PipeOp::forward, i});
  // Steady state: the next forward, then the oldest backward.
  for (int64_t i = 0; i < m - warmup; ++i) {
    ops.push_back({PipeOp::forward, warmup + i});
    ops.push_back({PipeOp::backward, i});
  }
  for (int64_t i = m - warmup; i < m; ++i) ops.push_back({PipeOp::backward, i});  // cool-down
  return ops;
}

std::string schedule_string(const std::vector<PipeOp>& ops) {
  std::string out;
  for (const PipeOp& op : ops) out += cat(out.empty() ? "" : " ", op.kind == PipeOp::forward ? "F" : "B", op.micro);
  return out;
}

int64_t max_in_flight(const std::vector<PipeOp>& ops) {
  int64_t now = 0, most = 0;
  for (const PipeOp& op : ops) {
    now += op.kind == PipeOp::forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

double ideal_bubble(int pp, int64_t m) { return double(pp - 1) / double(m + pp - 1); }

}  // namespace eng::comm
