// ZeRO stage 1 (Rajbhandari et al. 2020; PyTorch's ZeroRedundancyOptimizer,
// Megatron's distributed optimizer): AdamW whose state is split over the dp
// ranks, so each rank keeps 1/dp of the moments (8 bytes per parameter in
// fp32, twice the weights themselves) instead of all of them.
//
// Per step, with the gradient buckets of a DistributedDataParallel in shard
// mode (each bucket padded to a multiple of dp):
//   1. backward: each full bucket is reduce-scattered (averaged): rank r
//      gets elements [r*n, (r+1)*n) of the averaged bucket, its shard;
//   2. clipping: the global norm is the square root of the sum over ranks
//      of each shard's sum of squares (one all-reduce of a scalar);
//   3. AdamW (the fused kernel on GPUs) updates this rank's shard of the
//      fp32 master weights: the "pieces", the parts of parameters that fall
//      in the shard, each a view into the bucket's flat weight buffer;
//   4. all-gather of the flat weight buffers (in place), then every
//      parameter is copied out of it: all ranks hold the same new weights.
// Checkpoints: state() gathers the moments into the layout a plain AdamW
// over the same groups has ("exp_avg.i", ...), so a checkpoint resumes with
// or without ZeRO and at any dp; load_state() takes that layout.
// 8-bit AdamW (eight_bit): the shard's pieces keep 8-bit moments. The ddp
// buckets must be aligned to 256 (DdpOptions::align), so a shard holds whole
// quantization blocks of the full tensors: the blocks, their absmaxes and so
// the updates are those of one process, bit for bit, and the gathered state
// is AdamW8bit's own layout.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/ddp.h"
#include "engine/optim/optimizer.h"

namespace eng::comm {

class ZeroAdamW : public Optimizer {
 public:
  // groups: the model's parameter groups (as for AdamW); ddp: built over the
  // same parameters in shard mode, its communicator the dp group's.
  ZeroAdamW(std::vector<ParamGroup> groups, DistributedDataParallel& ddp, Communicator& comm, double lr, double beta1,
            double beta2, double eps = 1e-8, bool eight_bit = false);

  // Tensor parallel: this optimizer holds one tp rank's shards. The clip
  // norm then sums the squares over tp too, the `replicated` parameters'
  // (the same on every tp rank) counted once; the `partial` ones (sequence
  // parallel: each tp rank's gradient covers its token rows only) are summed
  // over tp first, in this rank's shard (the tp ranks of one dp rank build
  // the same buckets, so their shards line up).
  void set_tensor_parallel(Communicator& tp, const std::vector<Tensor>& replicated,
                           const std::vector<Tensor>& partial = {});

  // Pipeline parallel: this optimizer holds one stage's parameters. The clip
  // norm then sums the squares over pp too, leaving out `uncounted` (the last
  // stage's copy of GPT-2's tied table, whose gradient equals the first's).
  void set_pipeline(Communicator& pp, const std::vector<Tensor>& uncounted);
  // Not used: the step needs the clip, below.
  using Optimizer::step;
  void step() override;
  const char* name() const override { return inner_->name(); }
  std::string state_note() const override { return inner_->state_note(); }
  // cpu: clips to max_norm (the global norm; <= 0: off), steps, gathers the
  // weights; returns the norm before clipping.
  double clip_and_step(double max_norm);
  // emu/cuda: the same with no host read; returns the device {norm, factor}.
  // Capturable in a CUDA graph (then prepare_replay() before each replay).
  Tensor clip_and_step_device(double max_norm);
  void prepare_replay() override;

  // Collective over dp: every rank calls (rank 0 writes the checkpoint).
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

  const Optimizer& shard_optimizer() const { return *inner_; }  // this rank's moments
  size_t shard_state_bytes() const;                             // the moments this rank keeps

 private:
  struct Piece {
    size_t param;       // index into the flat parameter order (the groups' order)
    size_t bucket;      // its bucket
    int64_t begin = 0;  // first element of the parameter in this piece
    int64_t len = 0;
  };
  void load_pieces();  // model weights -> this rank's master shard
  // The masters' gradients as (weight, pieces) pairs for the norm: 1, or
  // 1/tp for replicated parameters under tensor parallelism.
  std::vector<std::pair<double, std::vector<Tensor>>> norm_terms() const;
  void gather_params();  // all-gather the weights, copy them out to the model
  void step_shard(const Tensor* grad_scale);

  DistributedDataParallel& ddp_;
  Communicator& comm_;
  std::vector<Tensor> params_;       // the groups' parameters, flat
  std::vector<size_t> ddp_index_;    // params_[i] is ddp.parameters()[ddp_index_[i]]
  std::vector<int64_t> ddp_offset_;  // its element offset in its bucket
  std::vector<size_t> ddp_bucket_;
  std::vector<Tensor> weights_;  // per bucket: the flat weights (same layout as its gradients)
  std::vector<Piece> pieces_;
  std::vector<Tensor> masters_;       // per piece: a view into weights_ (the inner AdamW's parameters)
  std::unique_ptr<Optimizer> inner_;  // AdamW or AdamW8bit over the pieces
  bool eight_bit_ = false;
  std::vector<bool> quantized_;  // per params_ entry: 8-bit moments (the full tensor has >= 4096 elements)
  // A kind of per-parameter state in the checkpoint's layout: its name, its
  // dtype, and elements per entry (1, or 256 for a block's absmax).
  struct Layout {
    const char* name;
    DType dt;
    int64_t unit;
    bool quantized;  // the parameters it is for
  };
  std::vector<Layout> layouts() const;
  Communicator* tp_ = nullptr;
  std::vector<bool> replicated_, partial_;  // per params_ entry, under tp
  Communicator* pp_ = nullptr;
  std::vector<bool> uncounted_;  // per params_ entry, under pp
  void sum_partial_over_tp();
};

}  // namespace eng::comm
