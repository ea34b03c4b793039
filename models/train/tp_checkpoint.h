// Checkpoints of a model split over tp (models/tp_model.h) in the
// one-process layout, so they resume at any tp: the weights gathered into a
// serial model of the same config (rank 0 writes it), the optimizer's
// per-parameter state ("kind.i", i numbering the parameters in decay-group
// order, which is the same for the split and the serial model): fp32
// moments gathered to the full shape of parameter i, other kinds (Adafactor's
// row and column statistics, 8-bit codes of whole parameters) as they are,
// and 8-bit codes and scales of split parameters one row per tp rank (those
// resume at their tp only); loading keeps this rank's shards (a pipeline
// stage: of its own parameters, matched by name).
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
// into `serial` (given on rank 0 only, null elsewhere), and returned, the
// optimizer's state of m's shards in the checkpoint's layout (above) on the
// host (the step counts unchanged).
NamedTensors gather_tp_checkpoint(const TpModel& m, Module* serial, NamedTensors opt_state, Device dev);
// Pipeline parallel: the same, and then the stages' tensors sent to world
// rank 0 over the pp group of the stage leaders (the ranks at dp, cp and tp
// rank 0; everyone else returns after the tp gathering). owner(name) is the
// stage that sends a parameter (GPT-2's token table, on the first and the
// last stage, is sent by neither: rank 0's first stage holds it). Rank 0
// fills `serial` and returns the optimizer's state in the serial model's order.
struct StageGather {
  comm::Communicator* pp = nullptr;
  std::function<int(const std::string&)> owner;
  bool leader = false;
};
NamedTensors gather_pipeline_checkpoint(const TpModel& m, Module* serial, NamedTensors opt_state, Device dev,
                                        const StageGather& g);
// load(opt) reads a one-process checkpoint into `serial` (a serial model on
// the host) and opt (given one that keeps the file's state as it is), then m
// and `opt` take this rank's shards. Returns what load returns (state.json).
nlohmann::json load_tp_checkpoint(TpModel& m, Module& serial, Optimizer& opt, Device dev,
                                  const std::function<nlohmann::json(Optimizer&)>& load);

}  // namespace eng::models
