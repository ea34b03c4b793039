// The language models' data (token_batches.h).
#include "models/train/token_batches.h"

#include "base/error.h"
#include "comm/cp_mappings.h"
#include "comm/world.h"
#include "engine/autograd.h"

namespace eng::models {

TokenBatches::TokenBatches(const TrainConfig& c, const BatchPlan& plan, int64_t vocab, const ModelGrid& mg)
    : plan_(plan),
      T_(c.i("seq_len")),
      seed_(uint64_t(c.i("seed"))),
      mg_(mg),
      train_(c.s("train_bin"), vocab),
      val_(c.s("val_bin"), vocab),
      sampler_(train_, plan.micro, T_, TokenSampler::Order::random, seed_) {
  const int64_t val_windows = TokenSampler(val_, plan.micro, T_, TokenSampler::Order::sequential, 0).windows();
  ENGINE_USER_CHECK(val_windows >= plan.micro * plan.dp, val_.path(), ": ", val_windows, " validation windows of ", T_,
                    " tokens, fewer than batch_size x dp = ", plan.micro, " x ", plan.dp,
                    " (each rank needs a batch of its own)");
  for (int64_t m = 0; m < plan.accum; ++m) {
    xs_.push_back(Tensor::empty({plan.micro, T_}, DType::i32));
    ys_.push_back(Tensor::empty({plan.micro, T_}, DType::i32));
  }
}

std::string TokenBatches::describe() const { return cat(train_.describe(), ", ", val_.describe()); }

MicroBatch TokenBatches::next(int64_t m) {
  Tensor &x = xs_[size_t(m)], &y = ys_[size_t(m)];
  sampler_.batch(plan_.micro_index(step_, m), x, y);  // ids checked when the file was opened
  if (m == plan_.accum - 1) ++step_;
  return mine({x, y});
}

MicroBatch TokenBatches::mine(const MicroBatch& b) const {
  if (!mg_.cp) return b;
  return {comm::cp_slice(b.x, 1, *mg_.cp), comm::cp_slice(b.y, 1, *mg_.cp)};
}

double TokenBatches::validation_loss(int64_t val_batches, const std::function<double(const MicroBatch&)>& loss,
                                     PipelineStep* pipe, const StageFn& stage, const StageIo& io) {
  NoGradGuard ng;
  TokenSampler s(val_, plan_.micro, T_, TokenSampler::Order::sequential, 0);
  Tensor x = Tensor::empty({plan_.micro, T_}, DType::i32), y = Tensor::empty({plan_.micro, T_}, DType::i32);
  double total = 0;
  if (pipe) {
    // Through the pipeline, micro-batch k accum + m in order; the last stage's losses.
    const auto outs = pipe->forward_only(
        val_batches * plan_.accum,
        [&](int64_t i, const Tensor& in) {
          s.batch(plan_.micro_index(i / plan_.accum, i % plan_.accum), x, y);
          return stage(in, mine({x, y}));
        },
        io);
    for (const Tensor& l : outs) total += l.item();
  } else {
    for (int64_t k = 0; k < val_batches; ++k)
      for (int64_t m = 0; m < plan_.accum; ++m) {
        s.batch(plan_.micro_index(k, m), x, y);
        total += loss(mine({x, y}));
      }
  }
  // Every rank of the last stage adds its mean; the tp ranks of a dp rank
  // hold the same one, its cp ranks the means of their positions.
  return comm::all_reduce_host(total / double(val_batches * plan_.accum), comm::HostOp::sum, "the validation loss") /
         double(comm::world().size / mg_.pp_size());
}

nlohmann::json TokenBatches::data_state(int64_t done) const {
  return {{"order", "random"}, {"seed", seed_}, {"global_batch", plan_.global()}, {"next_row", done * plan_.global()}};
}

void TokenBatches::check_resume(const std::string& dir, const nlohmann::json& state) const {
  const int64_t saved = state.value("sampler", nlohmann::json::object()).value("global_batch", int64_t(0));
  ENGINE_USER_CHECK(saved == 0 || saved == plan_.global(), dir, ": checkpoint was trained with a global batch of ",
                    saved, " sequences, this run has ", plan_.global(),
                    " (batch_size x grad_accum x ranks; set global_batch = ", saved, ")");
}

}  // namespace eng::models
