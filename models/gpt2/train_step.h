// One optimizer step of GPT-2 training on a GPU device (emu or cuda), for
// every precision level without loss scaling: the micro-batches' forward and
// backward, the clip coefficient on the device, and the fused AdamW update,
// with no host read in between (engine/graph.h). With data parallelism the
// gradient all-reduces are part of the step, so an O3 graph captures them. So the same step runs eagerly
// or, at O3, is captured once as a CUDA graph and replayed every step after:
//   step 1         eager (creates the optimizer state, warms the caches)
//   step 2         capture (nothing runs), then replay
//   steps 3...     upload the batches, prepare_replay(), replay
// On emu the emulator records and replays the same work, which is how CI
// checks that a replayed step equals an eager one, bit for bit.
#pragma once
#include <memory>
#include <vector>

#include "comm/ddp.h"
#include "comm/zero.h"
#include "engine/graph.h"
#include "engine/optim/optimizer.h"
#include "engine/precision.h"
#include "models/gpt2/gpt2.h"

namespace eng::models {

class GpuTrainStep {
 public:
  GpuTrainStep(const GPT2& model, AdamW& opt, int64_t B, int64_t T, int64_t accum, Recompute recompute,
               const Autocast& ac, double grad_clip, bool use_graph, comm::DistributedDataParallel* ddp = nullptr,
               comm::ZeroAdamW* zero = nullptr);
  struct Result {
    std::vector<double> losses;  // per micro-batch
    double grad_norm = 0;        // before clipping
    bool replayed = false;       // this step was a graph replay
  };
  // xs, ys: accum host i32 (B, T) batches. Sets the lr, runs the step, reads the results.
  Result run(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, double lr);
  bool captured() const { return graph_ != nullptr; }

 private:
  void enqueue();  // the step's device work, eager or into a capture
  const GPT2& model_;
  AdamW& opt_;
  int64_t accum_;
  Recompute recompute_;
  Autocast ac_;
  double grad_clip_;
  bool use_graph_;
  comm::DistributedDataParallel* ddp_;  // averages the gradients over dp (null: one rank)
  comm::ZeroAdamW* zero_;               // --zero 1: steps instead of opt_ (which then only zeroes the gradients)
  int64_t steps_ = 0;
  std::vector<Tensor> xs_, ys_;  // the device inputs: the same buffers every step (the graph reads them)
  std::vector<Tensor> losses_;   // device scalars written by the step
  Tensor norm_coef_;             // device {norm, factor}
  std::unique_ptr<CudaGraph> graph_;
};

}  // namespace eng::models
