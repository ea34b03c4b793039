// The GPU training step, eager or as a CUDA graph (see train_step.h).
#include "models/train/train_step.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

GpuTrainStep::GpuTrainStep(std::vector<Tensor> params, Optimizer& opt, int64_t accum, LossFn loss, double grad_clip,
                           bool use_graph, comm::DistributedDataParallel* ddp, comm::ZeroAdamW* zero, const TpGrads* tp)
    : params_(std::move(params)),
      dev_(params_.empty() ? kCPU : params_[0].device()),
      opt_(opt),
      accum_(accum),
      loss_(std::move(loss)),
      grad_clip_(grad_clip),
      use_graph_(use_graph),
      ddp_(ddp),
      zero_(zero),
      tp_(tp),
      inputs_(size_t(accum)) {
  ENGINE_CHECK(dev_.type != DeviceType::cpu, "GpuTrainStep: needs parameters on a GPU device (cuda or emu), got ",
               dev_.str());
}

MicroBatch& GpuTrainStep::staged(int64_t m, const MicroBatch& b) {
  MicroBatch& in = inputs_[size_t(m)];
  if (!in.x.defined()) {  // the first step: the buffers take the batches' shapes for good
    in.x = Tensor::empty(b.x.shape(), b.x.dtype(), dev_);
    in.y = Tensor::empty(b.y.shape(), b.y.dtype(), dev_);
  }
  ENGINE_CHECK(b.x.shape() == in.x.shape() && b.x.dtype() == in.x.dtype() && b.y.shape() == in.y.shape() &&
                   b.y.dtype() == in.y.dtype(),
               "GpuTrainStep: micro-batch ", m, " is ", b.x.desc(), " / ", b.y.desc(), ", the step's inputs are ",
               in.x.desc(), " / ", in.y.desc());
  in.x.copy_from(b.x);  // on the compute stream: after the loader's copy, before the step reads it
  in.y.copy_from(b.y);
  return in;
}

void GpuTrainStep::enqueue(const std::function<MicroBatch(int64_t)>& batch) {
  losses_.clear();
  if (pipe_.step)  // the stage's plan: micro-batch m is fetched at its forward, in order
    losses_ = pipe_.step->run([&](int64_t m, const Tensor& in) { return pipe_.forward(in, batch(m)); }, pipe_.io, ddp_);
  for (int64_t m = 0; m < accum_ && !pipe_.step; ++m) {
    const MicroBatch b = batch(m);
    // The loss is seeded with 1/accum, its mean over the micro-batches: a
    // loss that computes its gradient in its forward (cross_entropy) folds
    // the seed in there (ExpectedSeed), and no pass rescales it after.
    const double seed = 1.0 / double(accum_);
    Tensor loss;
    {
      const profile::Range r("forward");
      const ExpectedSeed expected(seed);
      loss = loss_(b.x, b.y);
    }
    losses_.push_back(loss.detach());
    if (ddp_) ddp_->set_sync(m == accum_ - 1);  // only the last micro-step communicates
    const profile::Range r("backward");
    run_backward(loss, seed);
  }
  {
    const profile::Range r("communication");
    if (ddp_) ddp_->finish();
    if (tp_ && !zero_) tp_->sync_partial();  // ZeRO sums them in its shard
    for (const Tensor& p : pipe_.tied) {     // the two copies of a tied table stay equal
      Tensor g = zero_ ? ddp_->bucket_holding(p).shard : p.grad();
      pipe_.embed->all_reduce(g, comm::ReduceOp::sum).wait();
    }
  }
  const profile::Range r("optimizer");
  if (zero_) {
    norm_coef_ = zero_->clip_and_step_device(grad_clip_);  // global norm, sharded AdamW, all-gather
    return;
  }
  static const TpGrads no_tp;
  norm_coef_ = pipe_.step ? pipeline_clip_coefficient(params_, tp_ ? *tp_ : no_tp, pipe_.uncounted, pipe_.step->comm(),
                                                      grad_clip_)
               : tp_      ? tp_clip_coefficient(*tp_, grad_clip_)
                          : clip_coefficient(params_, grad_clip_);
  opt_.step(norm_coef_.slice(1, 2));
}

GpuTrainStep::Result GpuTrainStep::run(const BatchFn& next, double lr) {
  opt_.set_lr(lr);
  if (zero_) zero_->set_lr(lr);
  Result r;
  if (!use_graph_ || steps_ < eager_steps_) {
    opt_.zero_grad();
    auto on_device = [&](const MicroBatch& b) { return b.x.device() == dev_ && b.y.device() == dev_; };
    const MicroBatch first = next(0);
    if (!on_device(first)) {
      // Host batches (GPT-2's token windows): all uploaded before any compute
      // is enqueued, so the uploads do not wait for the micro-steps between.
      staged(0, first);
      for (int64_t m = 1; m < accum_; ++m) staged(m, next(m));
      enqueue([&](int64_t m) { return inputs_[size_t(m)]; });
    } else {
      // Device batches (the loader's double buffer): used where they lie,
      // each fetched as its turn comes (the loader reuses a buffer only
      // after the compute enqueued before the fetch).
      enqueue([&](int64_t m) {
        const MicroBatch b = m == 0 ? first : next(m);
        return on_device(b) ? b : staged(m, b);
      });
    }
  } else {
    for (int64_t m = 0; m < accum_; ++m) staged(m, next(m));
    if (!graph_) {
      // Gradients are allocated inside the capture (from the graph's pool)
      // and written, not accumulated, by its first backward: every replay
      // recomputes them from scratch, so they are never zeroed again.
      opt_.zero_grad();
      // The capture allocates from a pool of its own: hand the blocks the
      // eager step left cached back first, or the device holds both.
      allocator_for(dev_).empty_cache();
      graph_ = std::make_unique<CudaGraph>(dev_);
      try {
        graph_->capture_begin();
        enqueue([&](int64_t m) { return inputs_[size_t(m)]; });
        graph_->capture_end();
      } catch (...) {
        graph_->capture_abort();
        graph_.reset();
        throw;
      }
    }
    if (zero_)
      zero_->prepare_replay();
    else
      opt_.prepare_replay();
    {
      const profile::Range replay("graph replay");  // the whole step: one launch, no ranges inside
      graph_->replay();
    }
    r.replayed = true;
  }
  ++steps_;
  for (const Tensor& l : losses_) r.losses.push_back(l.to_f64_vector()[0]);
  r.grad_norm = norm_coef_.to_f64_vector()[0];
  return r;
}

}  // namespace eng::models
