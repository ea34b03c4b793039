// The model of a language-model task (GPT-2's, the Llama's): the serial
// model in one process, or this rank's part of the model split over tp, cp
// and pp (GPT2Tp, LlamaTp: the same interface), and what the train loop asks
// of either: the loss, a pipeline stage's pass, text-sample logits, weights
// from a file, and checkpoints gathered to (and loaded from) the serial
// model's layout on rank 0, so they resume at any grid.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/pipeline_schedule.h"
#include "comm/world.h"
#include "engine/ops.h"
#include "models/train/pipeline_step.h"
#include "models/train/split_logits.h"
#include "models/train/task.h"
#include "models/train/tp_checkpoint.h"

namespace eng::models {

// Serial(config, seed, dev); Split(config, seed, dev, tp, Options) with
// Options{sequence_parallel, cp, layer_begin, layer_end}.
template <class Config, class Serial, class Split, class Options>
class LmModels {
 public:
  LmModels(const Config& c, uint64_t seed, Device dev, const ModelGrid& mg, bool sequence_parallel)
      : cfg_(c), seed_(seed), dev_(dev), mg_(mg), sp_(sequence_parallel && mg.tp_size() > 1) {
    if (!mg.split()) {
      serial = std::make_unique<Serial>(c, seed, dev);
      return;
    }
    Options o{sp_, mg.cp};
    if (mg.pp) {
      std::tie(o.layer_begin, o.layer_end) = stage_blocks(mg.stage_layers, mg.pp_rank());
      pipe = std::make_unique<PipelineStep>(*mg.pp, comm::PipeSchedule::afab, 1);  // validation, samples
    }
    split = std::make_unique<Split>(c, seed, dev, *mg.tp, o);
    if (mg.tp_size() > 1) tp_grads = tp_grads_of(*split);
  }

  Module& module() { return split ? static_cast<Module&>(*split) : *serial; }
  Tensor loss(const Tensor& x, const Tensor& y, Recompute rc, const Autocast& ac) const {
    return split ? split->loss(x, y, rc, ac) : serial->loss(x, y, rc, ac);
  }
  // A pipeline stage's pass over micro-batch b (host ids): the rows for the
  // next stage, or on the last stage the micro-batch's mean loss.
  Tensor stage_forward(const Tensor& in, const MicroBatch& b, Recompute rc, const Autocast& ac) const {
    const Tensor out = split->stage_forward(in, b.x.to(dev_), rc, ac);
    return mg_.last_stage() ? split->stage_loss(out, b.y.to(dev_)) : out;
  }
  StageIo stage_io(int64_t micro, int64_t T, const Autocast& ac) const {
    return {split->stage_rows(micro, T / mg_.cp_size()), stage_dtype(ac.policy().compute, dev_)};
  }
  // The T x V logits of a sample's window on the host (split: every rank of the group takes part).
  std::vector<float> logits(const std::vector<int32_t>& window, int64_t block_size, int64_t V) const {
    if (split) return split_logits(*split, mg_, pipe.get(), sp_, block_size, V, window, dev_);
    const Tensor ids = Tensor::from_ints(window, {1, int64_t(window.size())}, dev_);
    return serial->forward(ids, Recompute::no, Autocast(), AttentionImpl::ours).to_vector();
  }
  // --init_from: `load` reads the file into a serial model (split: every
  // rank reads it on the host and keeps its shards).
  void init_from(const std::function<void(Serial&)>& load) {
    if (!split) return load(*serial);
    Serial full(cfg_, seed_, kCPU);
    load(full);
    split->load_full_state(full.named_parameters());
  }
  // Every rank, before rank 0 saves: the weights gathered into a serial
  // model on rank 0 (to_save()), each moment by its parameter's name.
  // owner(name): the pipeline stage that sends a parameter.
  std::vector<std::pair<std::string, Tensor>> gather(std::vector<std::pair<std::string, Tensor>> opt_state,
                                                     const std::function<int(const std::string&)>& owner) {
    if (!split) return opt_state;
    if (comm::world().rank == 0) full_ = std::make_unique<Serial>(cfg_, seed_, kCPU);
    if (!pipe) return gather_tp_checkpoint(*split, full_.get(), std::move(opt_state), dev_);
    return gather_pipeline_checkpoint(*split, full_.get(), std::move(opt_state), dev_,
                                      StageGather{mg_.pp, owner, mg_.stage_leader});
  }
  const Serial& to_save() const { return split ? *full_ : *serial; }
  // A one-process checkpoint read by `load` into a serial model; split:
  // every rank keeps its shards of it.
  nlohmann::json load_checkpoint(Optimizer& opt, const std::function<nlohmann::json(Serial&, Optimizer&)>& load) {
    if (!split) return load(*serial, opt);
    Serial full(cfg_, seed_, kCPU);
    return load_tp_checkpoint(*split, full, opt, dev_, [&](Optimizer& o) { return load(full, o); });
  }

  std::unique_ptr<Serial> serial;      // one process holds the whole model, or
  std::unique_ptr<Split> split;        // tp, cp or pp: this rank's part
  std::unique_ptr<PipelineStep> pipe;  // pp: forward through the stages (validation, samples)
  TpGrads tp_grads;                    // tp > 1: how the step treats the gradients

 private:
  Config cfg_;
  uint64_t seed_;
  Device dev_;
  ModelGrid mg_;
  bool sp_;
  std::unique_ptr<Serial> full_;  // rank 0 under a split: the gathered weights being saved
};

}  // namespace eng::models
