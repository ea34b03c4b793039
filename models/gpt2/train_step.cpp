// The GPU training step, eager or as a CUDA graph (see train_step.h).
#include "models/gpt2/train_step.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng::models {

GpuTrainStep::GpuTrainStep(const GPT2& model, AdamW& opt, int64_t B, int64_t T, int64_t accum, Recompute recompute,
                           const Autocast& ac, double grad_clip, bool use_graph, comm::DistributedDataParallel* ddp,
                           comm::ZeroAdamW* zero)
    : model_(model),
      opt_(opt),
      accum_(accum),
      recompute_(recompute),
      ac_(ac),
      grad_clip_(grad_clip),
      use_graph_(use_graph),
      ddp_(ddp),
      zero_(zero) {
  const Device dev = model.device();
  ENGINE_CHECK(dev.type != DeviceType::cpu, "GpuTrainStep: needs a GPU device (cuda or emu), got ", dev.str());
  for (int64_t m = 0; m < accum; ++m) {
    xs_.push_back(Tensor::empty({B, T}, DType::i32, dev));
    ys_.push_back(Tensor::empty({B, T}, DType::i32, dev));
  }
}

void GpuTrainStep::enqueue() {
  losses_.clear();
  for (int64_t m = 0; m < accum_; ++m) {
    Tensor loss = model_.loss(xs_[size_t(m)], ys_[size_t(m)], recompute_, ac_);
    losses_.push_back(loss.detach());
    if (accum_ > 1) loss = scale(loss, 1.0 / double(accum_));
    if (ddp_) ddp_->set_sync(m == accum_ - 1);  // only the last micro-step communicates
    loss.backward();
  }
  if (ddp_) ddp_->finish();
  if (zero_) {
    norm_coef_ = zero_->clip_and_step_device(grad_clip_);  // global norm, sharded AdamW, all-gather
    return;
  }
  norm_coef_ = clip_coefficient(model_.parameters(), grad_clip_);
  opt_.step(norm_coef_.slice(1, 2));
}

GpuTrainStep::Result GpuTrainStep::run(const std::vector<Tensor>& xs, const std::vector<Tensor>& ys, double lr) {
  ENGINE_CHECK(xs.size() == xs_.size() && ys.size() == ys_.size(), "GpuTrainStep: ", xs_.size(),
               " micro-batches expected, got ", xs.size());
  // Ids are checked here, on the host: a replay does not check them (the
  // embedding and loss kernels trust them, and the bucket sort indexes by them).
  const int64_t V = model_.config().vocab_size;
  for (size_t m = 0; m < xs_.size(); ++m)
    for (const Tensor* t : {&xs[m], &ys[m]}) {
      ENGINE_CHECK(t->device() == kCPU && t->dtype() == DType::i32 && t->shape() == xs_[m].shape(),
                   "GpuTrainStep: batch ", m, " must be host i32 ", shape_str(xs_[m].shape()), ", got ", t->desc());
      const int32_t* id = t->data<int32_t>();
      for (int64_t i = 0; i < t->numel(); ++i)
        ENGINE_CHECK(id[i] >= 0 && id[i] < V, "GpuTrainStep: token ", id[i], " at position ", i, " of batch ", m,
                     " outside the vocabulary [0, ", V, ")");
    }
  for (size_t m = 0; m < xs_.size(); ++m) {
    xs_[m].copy_from(xs[m]);
    ys_[m].copy_from(ys[m]);
  }
  opt_.set_lr(lr);
  if (zero_) zero_->set_lr(lr);
  Result r;
  if (!use_graph_ || steps_ == 0) {
    opt_.zero_grad();
    enqueue();
  } else {
    if (!graph_) {
      // Gradients are allocated inside the capture (from the graph's pool)
      // and written, not accumulated, by its first backward: every replay
      // recomputes them from scratch, so they are never zeroed again.
      opt_.zero_grad();
      // The capture allocates from a pool of its own: hand the blocks the
      // eager step left cached back first, or the device holds both.
      allocator_for(model_.device()).empty_cache();
      graph_ = std::make_unique<CudaGraph>(model_.device());
      try {
        graph_->capture_begin();
        enqueue();
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
    graph_->replay();
    r.replayed = true;
  }
  ++steps_;
  for (const Tensor& l : losses_) r.losses.push_back(l.to_f64_vector()[0]);
  r.grad_norm = norm_coef_.to_f64_vector()[0];
  return r;
}

}  // namespace eng::models
