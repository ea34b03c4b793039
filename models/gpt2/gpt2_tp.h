// GPT-2 split over a tp group, Megatron-LM style (comm/tp_layers.h,
// comm/vocab_parallel.h). What rank r of tp holds:
//   wte        rows [r Vp/tp, (r+1) Vp/tp) of the token table padded to Vp =
//              padded_vocab(V, tp); also the tied lm_head's shard
//   c_attn     heads [r NH/tp, (r+1) NH/tp): their q, k and v rows (3 blocks)
//   attn.c_proj the same heads' input columns; bias whole
//   mlp.c_fc   rows [r 4C/tp, (r+1) 4C/tp); mlp.c_proj those input columns
//   wpe, ln_1, ln_2, ln_f  whole (replicated)
// Forward: the embedding's partial rows are summed over tp, each block runs
// attention on its local heads (the fused kernel, unchanged) and an MLP slice,
// with one all-reduce after each (the row layers), and the loss is the
// vocab-parallel cross-entropy of the local logits: no rank holds the full
// logits. Under sequence parallelism the residual stream, layernorms and the
// position embedding run on 1/tp of the token rows, the all-reduces become
// all-gather + reduce-scatter, and the layernorm weights and row biases get
// partial gradients (sync_partial_grads sums them over tp).
// GPT-2 has no dropout here, so there is no per-rank seed stream to keep.
// Every rank draws the full weights from the serial model's seeds: tp = N
// starts where tp = 1 starts. A pipeline stage holds some of the blocks
// (GPT2TpOptions), named as in the serial model ("h.5" on any stage). Parameter names are the serial model's, with
// shards in place of tensors; full_state() gathers them (checkpoints).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/tp_layers.h"
#include "comm/vocab_parallel.h"
#include "models/gpt2/gpt2.h"
#include "models/position_ids.h"
#include "models/tp_model.h"

namespace eng::models {

struct GPT2TpOptions {
  bool sequence_parallel = false;
  // Context parallel (comm/cp_mappings.h): the ids are this cp rank's slice
  // of each sequence, positions [r T, (r+1) T) of cp T; attention sees the
  // keys of every slice (causal, with the slice's offset). Null: none.
  comm::Communicator* cp = nullptr;
  // Pipeline stage (models/train/pipeline_step.h): blocks [layer_begin,
  // layer_end) only (-1: to n_layer). The first stage (layer_begin 0) holds
  // the embeddings, the last (layer_end n_layer) the final norm and the tied
  // head, hence the token table too: GPT-2's two copies of wte, whose
  // gradients the train loop sums over the grid's embed group.
  int64_t layer_begin = 0, layer_end = -1;
};

class GPT2TpBlock : public Module {
 public:
  GPT2TpBlock(const GPT2Config& c, int layer, uint64_t seed, Device dev, comm::Communicator& tp, GPT2TpOptions o);
  // x: (B T, C) rows, or this rank's (B T / tp, C) under sequence parallelism.
  Tensor forward(const Tensor& x, int64_t B, int64_t T, const Autocast& ac = Autocast(),
                 AttentionImpl attention = AttentionImpl::ours) const;
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<comm::ColumnParallelLinear> c_attn, c_fc;
  std::shared_ptr<comm::RowParallelLinear> attn_proj, mlp_proj;
  const profile::Layer& range() const { return range_; }

 private:
  int64_t local_heads_, head_size_;
  comm::Communicator* cp_;
  profile::Layer range_;  // "h.3": its profiler range (engine/profile.h)
};

class GPT2Tp : public TpModel {
 public:
  // Checks that n_head and 4 n_embd divide by tp (one-line errors naming them).
  GPT2Tp(const GPT2Config& c, uint64_t seed, Device dev, comm::Communicator& tp, GPT2TpOptions o = {});
  // ids (B, T) i32 (under cp: this rank's slice) -> this rank's logits (B T, Vp / tp).
  // attention: the config's unless given (text sampling runs ours, as GPT2::forward says).
  Tensor forward(const Tensor& ids, Recompute recompute = Recompute::no, const Autocast& ac = Autocast(),
                 std::optional<AttentionImpl> attention = std::nullopt) const;
  // The mean cross-entropy (vocab parallel, fp32), the same on every tp rank.
  Tensor loss(const Tensor& ids, const Tensor& targets, Recompute recompute = Recompute::no,
              const Autocast& ac = Autocast()) const;
  // A pipeline stage's pass: `in` is the previous stage's output rows
  // (undefined on the first stage, which embeds the ids); the ids give B and
  // T on every stage. Returns the rows for the next stage (stage_rows), or on
  // the last stage its logits (as forward). forward() is this on a whole model.
  Tensor stage_forward(const Tensor& in, const Tensor& ids, Recompute recompute = Recompute::no,
                       const Autocast& ac = Autocast(), std::optional<AttentionImpl> attention = std::nullopt) const;
  // The last stage: the mean cross-entropy of its logits (as loss).
  Tensor stage_loss(const Tensor& logits, const Tensor& targets) const;
  // The shape of the rows a stage passes on: (B T, C), or this rank's B T / tp under sequence parallelism.
  Shape stage_rows(int64_t B, int64_t T) const;
  bool first_stage() const { return begin_ == 0; }
  bool last_stage() const { return end_ == cfg_.n_layer; }
  // Sequence parallel: the layernorms and row biases (tp_model.h).
  std::vector<Tensor> partial_parameters() const override;
  const GPT2Config& config() const { return cfg_; }

  std::shared_ptr<comm::VocabParallelEmbedding> wte;
  std::shared_ptr<Embedding> wpe;
  std::vector<std::shared_ptr<GPT2TpBlock>> h;
  std::shared_ptr<LayerNorm> ln_f;

 protected:
  TpSplit split_of(const std::string& name) const override;
  Tensor shard_custom(const std::string& name, const Tensor& full) const override;
  Tensor unshard_custom(const std::string& name, const Tensor& mine) const override;

 private:
  GPT2Config cfg_;
  GPT2TpOptions opt_;
  int64_t begin_, end_;  // this stage's blocks
  PositionIds positions_;
};

}  // namespace eng::models
