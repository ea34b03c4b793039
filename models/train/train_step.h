// One optimizer step on a GPU device (emu or cuda), for every precision level
// without loss scaling, and any model the train loop drives (task.h): the
// micro-batches' forward and backward, the clip coefficient on the device,
// and the optimizer's fused update (--optimizer), with no host read in between (engine/graph.h).
// With data parallelism the gradient all-reduces are part of the step, so an
// O3 graph captures them. So the same step runs eagerly or, at O3, is
// captured once as a CUDA graph and replayed every step after:
//   step 1         eager (creates the optimizer state, warms the caches)
//   step 2         capture (nothing runs), then replay
//   steps 3...     copy the batches into the step's inputs, prepare_replay(), replay
// A graph reads fixed addresses, so for it every micro-batch is copied into
// input buffers the step owns (a device-to-device copy for the data
// loader's batches, an upload for host ones). Eagerly, device batches are
// used where they lie and host batches are uploaded into those buffers.
// Batches are trusted: their sources check them (token files at open, the
// datasets' labels at open), and a replay could check nothing anyway.
// On emu the emulator records and replays the same work, which is how CI
// checks that a replayed step equals an eager one, bit for bit. Under
// pipeline parallelism the stage's sends and receives are part of the step
// (and of its graph) too.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "comm/ddp.h"
#include "comm/zero.h"
#include "engine/graph.h"
#include "engine/optim/optimizer.h"
#include "models/train/pipeline_step.h"
#include "models/train/task.h"

namespace eng::models {

class GpuTrainStep {
 public:
  // loss(x, y): a micro-batch's mean loss, a device scalar (the model's forward).
  using LossFn = std::function<Tensor(const Tensor& x, const Tensor& y)>;
  // next(m): micro-batch m of this step, on the host or the device.
  using BatchFn = std::function<MicroBatch(int64_t m)>;

  // params: the model's parameters (opt's), on the step's device.
  // tp: the model is split over a tp group (tp_grads.h): partial gradients
  // summed over it and the norm counted once per parameter, in the step.
  GpuTrainStep(std::vector<Tensor> params, Optimizer& opt, int64_t accum, LossFn loss, double grad_clip, bool use_graph,
               comm::DistributedDataParallel* ddp = nullptr, comm::ZeroAdamW* zero = nullptr,
               const TpGrads* tp = nullptr);
  struct Result {
    std::vector<double> losses;  // per micro-batch
    double grad_norm = 0;        // before clipping
    bool replayed = false;       // this step was a graph replay
  };
  // Pipeline parallel (pipeline_step.h): the micro-batches go through the
  // stage's plan, forward(in, b) being the stage's pass; after DDP the tied
  // tables' gradients are summed over `embed` (under ZeRO their buckets'
  // shards), and the clip norm is summed over the stages, `uncounted` left out.
  struct Pipeline {
    PipelineStep* step = nullptr;
    std::function<Tensor(const Tensor& in, const MicroBatch& b)> forward;
    StageIo io;
    std::vector<Tensor> tied, uncounted;
    comm::Communicator* embed = nullptr;
  };
  void set_pipeline(Pipeline p) { pipe_ = std::move(p); }
  // At O3, how many steps run eagerly before the capture (default 1: the
  // first builds the plans); a step profile moves it past its step so that
  // step is eager and warm (models/train/step_profile.h).
  void set_eager_steps(int64_t n) { eager_steps_ = std::max<int64_t>(n, 1); }
  // Sets the lr, runs the step on next(0) ... next(accum - 1), reads the results.
  Result run(const BatchFn& next, double lr);
  bool captured() const { return graph_ != nullptr; }

 private:
  // The step's device work, eager or into a capture; batch(m) gives micro-batch m.
  void enqueue(const std::function<MicroBatch(int64_t)>& batch);
  MicroBatch& staged(int64_t m, const MicroBatch& b);  // b copied into input buffer m
  std::vector<Tensor> params_;
  Device dev_;
  Optimizer& opt_;  // any with a GPU kernel: adamw, adamw8bit, adafactor
  int64_t accum_;
  LossFn loss_;
  double grad_clip_;
  bool use_graph_;
  comm::DistributedDataParallel* ddp_;  // averages the gradients over dp (null: one rank)
  comm::ZeroAdamW* zero_;               // --zero 1: steps instead of opt_ (which then only zeroes the gradients)
  const TpGrads* tp_;                   // tensor parallel: gradient sync and norm over tp (null: none)
  Pipeline pipe_;                       // pipeline parallel (step null: none)
  int64_t steps_ = 0;
  int64_t eager_steps_ = 1;
  std::vector<MicroBatch> inputs_;  // device copies: the same buffers every step (a graph reads them)
  std::vector<Tensor> losses_;      // device scalars written by the step
  Tensor norm_coef_;                // device {norm, factor}
  std::unique_ptr<CudaGraph> graph_;
};

}  // namespace eng::models
