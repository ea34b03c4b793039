// What the language models' tasks (GPT-2's, the Llama's) share: the token
// files, the micro-batches of a step in rank-major order (task.h), this cp
// rank's positions of them, the validation loss over the first windows of
// the validation files, and the data's place in a checkpoint.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/token_file.h"
#include "models/train/pipeline_step.h"
#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/train_dist.h"

namespace eng::models {

class TokenBatches {
 public:
  // train_bin and val_bin checked against `vocab` (errors name the file);
  // the validation files must hold a batch for every dp rank.
  TokenBatches(const TrainConfig& c, const BatchPlan& plan, int64_t vocab, const ModelGrid& mg);
  std::string describe() const;  // "TRAIN (N tokens), VAL (M tokens)"
  // Positions the data at optimizer step `step` (the sampler is
  // counter-based: a step's windows are a function of the step).
  void start(int64_t step) { step_ = step; }
  // Micro-batch m of the current step on the host, this cp rank's positions;
  // valid until the next call.
  MicroBatch next(int64_t m);
  // This cp rank's positions of whole windows (the windows without cp).
  MicroBatch mine(const MicroBatch& b) const;
  // The validation loss: val_batches global batches of consecutive windows,
  // split over the dp ranks as the training batches are; each micro-batch's
  // mean loss from `loss`, or through the pipeline `pipe` (each stage's
  // `stage`, the last stage's losses), then the mean over every rank of the
  // last stage, the same on every rank (a collective).
  using StageFn = std::function<Tensor(const Tensor& in, const MicroBatch& b)>;
  double validation_loss(int64_t val_batches, const std::function<double(const MicroBatch&)>& loss,
                         PipelineStep* pipe = nullptr, const StageFn& stage = {}, const StageIo& io = {});
  // state.json's "sampler" after `done` steps, and the check of a resumed one:
  // any number of ranks may resume, as long as the global batch (which
  // decides every step's rows) is the same.
  nlohmann::json data_state(int64_t done) const;
  void check_resume(const std::string& dir, const nlohmann::json& state) const;

 private:
  BatchPlan plan_;
  int64_t T_;
  uint64_t seed_;
  ModelGrid mg_;
  TokenFile train_, val_;
  TokenSampler sampler_;
  int64_t step_ = 0;
  std::vector<Tensor> xs_, ys_;  // the step's micro-batches, on the host
};

}  // namespace eng::models
