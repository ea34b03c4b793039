// Pipeline-parallel schedules as data: the order in which one stage runs
// the forward and backward passes of a step's m micro-batches. The runner
// (models/train/pipeline_step.h) receives a stage's input before each
// forward (stage > 0) and sends its output after it (stage < pp - 1);
// backward the other way. Two schedules:
//   afab  all forward, all backward (GPipe, Huang et al. 2019): F0..F(m-1),
//         then B0..B(m-1). Every micro-batch's activations are held at once.
//   1f1b  one forward, one backward (PipeDream-Flush, Narayanan et al. 2021;
//         Megatron-LM's default): a warm-up of min(pp - stage - 1, m)
//         forwards, then alternately one forward and one backward, then a
//         cool-down of the backwards left. A stage holds at most pp - stage
//         micro-batches' activations.
// Both have the same bubble: with forward time f and backward time b per
// stage, a step takes (m + pp - 1)(f + b) where the work is m (f + b), so
// the idle fraction is (pp - 1) / (m + pp - 1). m < pp is allowed (1f1b's
// warm-up is then all of them, as afab), only idler.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eng::comm {

enum class PipeSchedule : uint8_t { afab, one_f_one_b };
PipeSchedule parse_pipe_schedule(const std::string& s);  // "afab" or "1f1b"
const char* pipe_schedule_name(PipeSchedule s);

struct PipeOp {
  enum Kind : uint8_t { forward, backward } kind;
  int64_t micro;  // 0 .. m-1
  bool operator==(const PipeOp&) const = default;
};

// Stage `stage` of pp, m micro-batches.
std::vector<PipeOp> pipeline_schedule(PipeSchedule s, int pp, int stage, int64_t m);
// "F0 F1 B0 ...": what tests and docs print.
std::string schedule_string(const std::vector<PipeOp>& ops);
// The most micro-batches whose forward has run and backward not yet: the
// activations the stage holds at its peak.
int64_t max_in_flight(const std::vector<PipeOp>& ops);
// The idle fraction of the ideal pipeline, (pp - 1) / (m + pp - 1).
double ideal_bubble(int pp, int64_t m);

// The messages around a schedule. A stage sends its forward output
// ("act", to stage + 1) and its input's gradient ("grad", to stage - 1); a
// send is not issued alone but with the next receive the stage needs, in one
// send_recv (a lone send may wait for its receiver, and two neighbours that
// each sent first would wait for each other forever: 1f1b's steady state
// does exactly that). So a plan is a list of steps: a batch of messages
// issued together and waited for, then one pass (or, last, none: the sends
// still pending).
struct PipeMsg {
  enum Kind : uint8_t { act, grad } kind;
  bool send;  // else receive
  int64_t micro;
  bool operator==(const PipeMsg&) const = default;
};
struct PipeStep {
  std::vector<PipeMsg> batch;  // may be empty
  bool has_op = true;
  PipeOp op{PipeOp::forward, 0};
};
std::vector<PipeStep> pipeline_plan(PipeSchedule s, int pp, int stage, int64_t m);

// Blocks per stage: `given` ("3,3,2", from --pp_layers) checked against the
// block count, or, when empty, the contiguous split whose costliest stage
// is cheapest (block_cost[i]: block i's FLOPs; first_extra and last_extra:
// the embeddings' and the head's, which the first and last stage carry).
// Every stage gets at least one block. Errors name the option.
std::vector<int64_t> stage_layers(const std::string& given, const std::vector<double>& block_cost, double first_extra,
                                  double last_extra, int pp);

}  // namespace eng::comm
