// Checkpoints of a model split over tp (models/tp_model.h) in the
// one-process layout, so they resume at any tp: the weights gathered into a
// serial model of the same config (rank 0 writes it), AdamW's moments
// ("exp_avg.i", "exp_avg_sq.i", i numbering the parameters in decay-group
// order, which is the same for the split and the serial model) gathered to
// the full shape of parameter i; loading keeps this rank's shards of both
// (a pipeline stage: of its own parameters, matched by name).
// Also the TpGrads the training step needs (tp_grads.h).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/optim/optimizer.h"
#include "models/tp_model.h"
#include "models/train/tp_grads.h"

namespace eng::models {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Which parameters are sharded, replicated and partial, and how to sum the partial ones.
TpGrads tp_grads_of(TpModel& m);

// Every rank of tp, before rank 0 saves (collective): m's weights gathered
// into `serial` (given on rank 0 only, null elsewhere), and returned, AdamW's
// moments of m's shards gathered to full shapes on the host (other
// entries, the step counts, unchanged).
NamedTensors gather_tp_checkpoint(const TpModel& m, Module* serial, NamedTensors opt_state, Device dev);
// Pipeline parallel: the same, and then the stages' tensors sent to world
// rank 0 over the pp group of the stage leaders (the ranks at dp, cp and tp
// rank 0; everyone else returns after the tp gathering). owner(name) is the
// stage that sends a parameter (GPT-2's token table, on the first and the
// last stage, is sent by neither: rank 0's first stage holds it). Rank 0
// fills `serial` and returns AdamW's state in the serial model's order.
struct StageGather {
  comm::Communicator* pp = nullptr;
  std::function<int(const std::string&)> owner;
  bool leader = false;
};
NamedTensors gather_pipeline_checkpoint(const TpModel& m, Module* serial, NamedTensors opt_state, Device dev,
                                        const StageGather& g);
// load(opt) reads a one-process checkpoint into `serial` (a serial model on
// the host) and opt; given an AdamW of serial's shape, then m and `opt`
// take this rank's shards. Returns what load returns (state.json).
nlohmann::json load_tp_checkpoint(TpModel& m, Module& serial, Optimizer& opt, Device dev,
                                  const std::function<nlohmann::json(Optimizer&)>& load);

}  // namespace eng::models
