// A pipeline stage's part of a training step (pipeline parallelism, --pp):
// the stage runs its plan (comm/pipeline_schedule.h), forward and backward
// passes of the step's micro-batches in the schedule's order, with the
// activations and their gradients passed to its neighbours over the pp
// group between passes. What a pass computes is the model's (a StageFn):
//   forward(m, in): stage 0 reads micro-batch m itself (`in` undefined);
//     the others get the previous stage's output as `in`, a leaf that
//     requires grad, so their backward leaves its gradient there to send
//     back. Returns the output to send on, or on the last stage the
//     micro-batch's mean loss.
//   backward: the last stage back-propagates loss / m (the step's loss is
//     the mean over its micro-batches, as without pp); the others their
//     output, seeded with the gradient received from the next stage.
// Parameter gradients accumulate over the micro-batches as with gradient
// accumulation; DDP (if any) is told to communicate on the last backward.
// Profiler ranges: "forward 3", "backward 3", and "p2p recv act 3, send
// grad 1" around each batch of sends and receives (their waits), so
// scripts/plot.py timeline draws the schedule of a real run.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/ddp.h"
#include "comm/pipeline_schedule.h"
#include "engine/tensor.h"

namespace eng::models {

// What stages pass each other for one micro-batch (the same both ways).
struct StageIo {
  Shape shape;
  DType dtype = DType::f32;
};

class PipelineStep {
 public:
  using StageFn = std::function<Tensor(int64_t m, const Tensor& in)>;
  // pp: the pipeline group's communicator (stage = its rank); m micro-batches per step.
  PipelineStep(comm::Communicator& pp, comm::PipeSchedule schedule, int64_t m);
  comm::Communicator& comm() const { return pp_; }
  int stage() const { return pp_.rank(); }
  int stages() const { return pp_.size(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() == stages() - 1; }
  const std::vector<comm::PipeStep>& plan() const { return plan_; }
  // One step's passes; returns the last stage's losses, one device scalar
  // per micro-batch (empty on the others). No host read: on a GPU device
  // the step can be captured as a CUDA graph (models/train/train_step.h).
  std::vector<Tensor> run(const StageFn& forward, const StageIo& io, comm::DistributedDataParallel* ddp);
  // Forward only, micro-batches 0..count-1 in order (validation, samples):
  // the last stage's outputs (empty on the others).
  std::vector<Tensor> forward_only(int64_t count, const StageFn& forward, const StageIo& io);
  // The last run(): when it began and ended (microseconds since the epoch,
  // the system clock, so that the stages' windows line up on one machine)
  // and the seconds it spent in passes. Over the stages' common window the
  // rest is the bubble (and the sends' own time).
  int64_t last_start_us() const { return start_us_; }
  int64_t last_end_us() const { return end_us_; }
  double last_busy_seconds() const { return busy_s_; }

 private:
  comm::Communicator& pp_;
  int64_t m_;
  int64_t start_us_ = 0, end_us_ = 0;
  double busy_s_ = 0;
  std::vector<comm::PipeStep> plan_;
};

// The bubble as measured over a run's steps (train's closing line): each
// step's window runs from the first stage's start to the last stage's end
// (the system clock, which the ranks of a node share), and a stage's idle
// share is the part of it not spent in its passes.
class BubbleMeter {
 public:
  void add(const PipelineStep& p);  // its last run()
  bool empty() const { return starts_.empty(); }
  // Collective over the world: the idle share averaged over the ranks.
  double idle() const;

 private:
  std::vector<double> starts_, ends_;  // us
  double busy_s_ = 0;
};

// Sums the gradients of the tied parameters over `embed` (the first and last
// stage), so the two copies take the same step. Under ZeRO (`shards`: the
// DDP in shard mode) each sits alone in a bucket (DdpOptions::alone) and its
// bucket's shard, reduced over dp, is summed instead.
void sum_tied_gradients(const std::vector<Tensor>& tied, comm::Communicator& embed,
                        const comm::DistributedDataParallel* shards);

// A model's split into stages (ModelGrid::stage_layers: blocks per stage):
// stage k's blocks [first, end); the start-up line's "pipeline stages
// (blocks): 0-1, 2-3"; the stage that holds parameter `name` (a block's
// "<block_prefix>L." by the split, a name under one of last_prefixes on the
// last stage, anything else on the first), which sends it for a checkpoint.
std::pair<int64_t, int64_t> stage_blocks(const std::vector<int64_t>& layers, int k);
std::string stage_summary(const std::vector<int64_t>& layers);
int parameter_stage(const std::string& name, const std::string& block_prefix,
                    const std::vector<std::string>& last_prefixes, const std::vector<int64_t>& layers);

// The dtype of the activations between stages at this precision: the
// compute dtype on GPU devices; f32 on the cpu, where autocast rounds and
// keeps f32 storage.
DType stage_dtype(DType compute, Device dev);

}  // namespace eng::models
