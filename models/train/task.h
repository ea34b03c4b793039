// What the train loop (models/train/train.cpp) trains: a model with its data,
// its loss, its validation and its checkpoint format. The loop owns
// everything the models share (the optimizer and schedule, precision levels,
// the GPU step and its CUDA graph, data parallelism, progress, metrics,
// checkpoint timing and resume); a task owns what differs:
//   GPT-2 (gpt2_task.h): flat token files, validation loss, text samples,
//     Hugging Face's GPT-2 checkpoint layout;
//   ViT (vit_task.h): HDF5 samples through the threaded loader, forecast
//     skill (lat-weighted RMSE, ACC vs persistence) or accuracy, timm names.
// Every task reads its micro-batches in the same rank-major order (rank r's
// micro-batch m of step s is global slot r * accum + m), so a data-parallel
// run sees exactly the batches of the one-process run with the same global
// batch.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "engine/precision.h"
#include "io/loader.h"
#include "models/train/pipeline_step.h"
#include "models/train/tp_grads.h"

namespace eng::models {

// The groups a model is split over: tp (heads and MLP) and cp (the
// sequence); null where the run does not split that way. With cp > 1 the
// tp communicator is given even at tp = 1 (a group of one): the split
// model's forward is the one that knows cp.
// pp: the pipeline's stages (this rank's is pp's rank), each holding
// stage_layers[k] blocks; stage_leader: this rank sends its stage's
// checkpoint tensors to rank 0 (dp, cp and tp rank 0).
struct ModelGrid {
  comm::Communicator* tp = nullptr;
  comm::Communicator* cp = nullptr;
  comm::Communicator* pp = nullptr;
  std::vector<int64_t> stage_layers;
  bool stage_leader = false;
  bool split() const { return tp != nullptr || cp != nullptr || pp != nullptr; }
  int tp_size() const { return tp ? tp->size() : 1; }
  int cp_size() const { return cp ? cp->size() : 1; }
  int cp_rank() const { return cp ? cp->rank() : 0; }
  int pp_size() const { return pp ? pp->size() : 1; }
  int pp_rank() const { return pp ? pp->rank() : 0; }
  bool last_stage() const { return pp_rank() == pp_size() - 1; }
};

struct MicroBatch {
  Tensor x, y;  // inputs and targets, on the host or the model's device
};

struct EvalResult {
  double loss = 0;                                    // mean over the validation batches and the dp ranks
  nlohmann::json metrics = nlohmann::json::object();  // more keys for the val line of metrics.jsonl
  std::string line;                                   // shown after "val loss X" (may be empty)
};

// The GEMM whose measured rate stands for the device's peak (MFU).
struct PeakGemm {
  int64_t m = 0, n = 0, k = 0;
};

class TrainTask {
 public:
  virtual ~TrainTask() = default;
  virtual Module& model() = 0;
  virtual std::string summary() const = 0;          // the start-up "model: ..." line
  virtual std::string data_summary() const = 0;     // the start-up "data: ..." line
  virtual const char* unit() const = 0;             // what a step processes: "tok" or "img"
  virtual std::string checkpoint_note() const = 0;  // how to load a checkpoint elsewhere (the last line)
  virtual int64_t items_per_step() const = 0;       // tokens or images per optimizer step, all ranks
  virtual double flops_per_step() const = 0;        // forward + backward, all ranks
  virtual PeakGemm peak_gemm() const = 0;
  // What the forward keeps for the backward, per sample of a micro-batch, on
  // this rank (models/train/memory_plan.h): the start-up memory check's figure.
  virtual double activation_bytes_per_sample(Precision p) const = 0;
  // Config keys a checkpoint must agree on to be resumed (the model's shape).
  virtual std::vector<std::string> shape_keys() const = 0;

  // Positions the data at optimizer step `step` (0, or the step resumed from).
  virtual void start(int64_t step) = 0;
  // Micro-batch m of the current step; called for m = 0 .. accum-1 in order,
  // each valid until the next call.
  virtual MicroBatch next(int64_t m) = 0;
  virtual Tensor loss(const Tensor& x, const Tensor& y, const Autocast& ac) const = 0;
  // The loader's counters since the last call (none for the token files).
  virtual std::optional<LoaderStats> take_data_stats() { return std::nullopt; }

  // Validation on every dp rank (a collective); the same result everywhere.
  virtual EvalResult evaluate(const Autocast& ac) = 0;
  // Something to show at sample_every steps (GPT-2's text), on rank 0, or on
  // every rank when drawing it is a collective (a tensor-parallel model).
  virtual bool has_samples() const { return false; }
  virtual bool sample_on_every_rank() const { return false; }
  virtual std::string sample(int64_t /*step*/) { return ""; }

  // Pipeline parallelism (ModelGrid::pp, models/train/pipeline_step.h):
  // this stage's pass over micro-batch b: `in` is the previous stage's
  // output (undefined on the first stage); returns the output to send on, or
  // on the last stage the micro-batch's mean loss. stage_io: what the
  // stages pass each other.
  virtual Tensor stage_forward(const Tensor& /*in*/, const MicroBatch& /*b*/, const Autocast& /*ac*/) const {
    ENGINE_FAIL("this model has no pipeline stages");
  }
  virtual StageIo stage_io(const Autocast& /*ac*/) const { ENGINE_FAIL("this model has no pipeline stages"); }
  // Parameters two stages hold (GPT-2's token table: the embedding on the
  // first stage, the tied head on the last): their gradients are summed over
  // the grid's embed group, and the global norm counts the first stage's.
  virtual std::vector<Tensor> tied_parameters() const { return {}; }

  // Tensor parallelism (GPT-2 with tp > 1): how the step treats the
  // gradients between backward and optimizer; inactive otherwise.
  virtual const TpGrads& tp_grads() const {
    static const TpGrads none;
    return none;
  }
  // Every rank, before rank 0 saves: the optimizer state in the checkpoint's
  // layout. Under tp, a collective: every tensor (the weights too) gathered
  // to its full shape, so the checkpoint is the one-process layout.
  virtual std::vector<std::pair<std::string, Tensor>> gather_for_checkpoint(
      std::vector<std::pair<std::string, Tensor>> opt_state) {
    return opt_state;
  }

  virtual void init_from(const std::string& path) = 0;  // --init_from weights
  // The checkpoint: weights in the model's own layout, the optimizer state,
  // and state.json = {"step", "config"} + extra.
  virtual void save_checkpoint(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& opt_state,
                               int64_t step, const nlohmann::json& config, const nlohmann::json& extra) const = 0;
  virtual nlohmann::json load_checkpoint(const std::string& dir, Optimizer& opt) = 0;
  // The data position after `done` steps, recorded in state.json as "sampler".
  virtual nlohmann::json data_state(int64_t done) const = 0;
  // Refuses a checkpoint whose data position this run cannot continue.
  virtual void check_resume(const std::string& dir, const nlohmann::json& state) const = 0;
};

}  // namespace eng::models
