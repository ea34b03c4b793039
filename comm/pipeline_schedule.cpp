// The afab and 1f1b schedules (pipeline_schedule.h).
#include "comm/pipeline_schedule.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "base/error.h"

namespace eng::comm {

PipeSchedule parse_pipe_schedule(const std::string& s) {
  if (s == "afab") return PipeSchedule::afab;
  if (s == "1f1b") return PipeSchedule::one_f_one_b;
  ENGINE_USER_FAIL("config: pp_schedule '", s, "': afab or 1f1b");
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

std::vector<PipeStep> pipeline_plan(PipeSchedule s, int pp, int stage, int64_t m) {
  std::vector<PipeStep> plan;
  std::vector<PipeMsg> pending;  // sends waiting for the next batch
  const bool first = stage == 0, last = stage == pp - 1;
  for (const PipeOp& op : pipeline_schedule(s, pp, stage, m)) {
    PipeStep step;
    step.batch = std::move(pending);
    pending.clear();
    const bool fwd = op.kind == PipeOp::forward;
    // A forward needs the previous stage's output, a backward the next stage's gradient.
    if (fwd && !first) step.batch.push_back({PipeMsg::act, false, op.micro});
    if (!fwd && !last) step.batch.push_back({PipeMsg::grad, false, op.micro});
    step.op = op;
    plan.push_back(std::move(step));
    if (fwd && !last) pending.push_back({PipeMsg::act, true, op.micro});
    if (!fwd && !first) pending.push_back({PipeMsg::grad, true, op.micro});
  }
  if (!pending.empty()) {
    PipeStep flush;
    flush.batch = std::move(pending);
    flush.has_op = false;
    plan.push_back(std::move(flush));
  }
  return plan;
}

}  // namespace eng::comm

namespace eng::comm {

std::vector<int64_t> stage_layers(const std::string& given, const std::vector<double>& block_cost, double first_extra,
                                  double last_extra, int pp) {
  const int64_t L = int64_t(block_cost.size());
  ENGINE_USER_CHECK(pp >= 1 && pp <= L, "config: pp = ", pp, " stages for n_layer = ", L,
                    " blocks (each stage needs at least one; lower pp)");
  if (!given.empty()) {
    std::vector<int64_t> out;
    std::stringstream ss(given);
    std::string item;
    int64_t sum = 0;
    while (std::getline(ss, item, ',')) {
      size_t used = 0;
      int64_t n = -1;
      try {
        n = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      ENGINE_USER_CHECK(used == item.size() && !item.empty() && n >= 1, "config: pp_layers '", given, "': '", item,
                        "' is not a block count >= 1");
      out.push_back(n);
      sum += n;
    }
    ENGINE_USER_CHECK(int64_t(out.size()) == pp, "config: pp_layers '", given, "' lists ", out.size(),
                      " stages, pp = ", pp);
    ENGINE_USER_CHECK(sum == L, "config: pp_layers '", given, "' sums to ", sum, " blocks, n_layer = ", L);
    return out;
  }
  // best[k][i]: the least possible costliest stage when stages 0..k-1 take blocks 0..i-1; among equal
  // splits the one with the most blocks early (the last stage also carries the loss).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> prefix(size_t(L + 1), 0.0);
  for (int64_t i = 0; i < L; ++i) prefix[size_t(i + 1)] = prefix[size_t(i)] + block_cost[size_t(i)];
  auto cost = [&](int k, int64_t a, int64_t b) {  // stage k holding blocks [a, b)
    return prefix[size_t(b)] - prefix[size_t(a)] + (k == 0 ? first_extra : 0) + (k == pp - 1 ? last_extra : 0);
  };
  std::vector<std::vector<double>> best(size_t(pp + 1), std::vector<double>(size_t(L + 1), inf));
  std::vector<std::vector<int64_t>> cut(size_t(pp + 1), std::vector<int64_t>(size_t(L + 1), 0));
  best[0][0] = 0;
  for (int k = 1; k <= pp; ++k)
    for (int64_t i = k; i <= L; ++i)
      for (int64_t j = k - 1; j < i; ++j) {
        const double c = std::max(best[size_t(k - 1)][size_t(j)], cost(k - 1, j, i));
        if (c <= best[size_t(k)][size_t(i)]) best[size_t(k)][size_t(i)] = c, cut[size_t(k)][size_t(i)] = j;
      }
  std::vector<int64_t> out(static_cast<size_t>(pp), 0);
  for (int64_t k = pp, i = L; k > 0; --k) {
    const int64_t j = cut[size_t(k)][size_t(i)];
    out[size_t(k - 1)] = i - j;
    i = j;
  }
  return out;
}

}  // namespace eng::comm
