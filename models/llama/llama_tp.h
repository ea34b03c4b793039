// A Llama split over a tp group, Megatron-LM style, as GPT-2's (gpt2_tp.h).
// What rank r of tp holds:
//   model.embed_tokens   rows [r Vp/tp, (r+1) Vp/tp) of the table padded to
//                        Vp = padded_vocab(V, tp) (and the tied head's shard)
//   lm_head              the same rows of the untied head's matrix
//   qkv_proj             query heads [r NH/tp, ...) and K/V heads [r NKV/tp,
//                        ...): three blocks of rows, each split (NKV must divide by tp)
//   o_proj               those query heads' input columns
//   gate_up_proj         rows [r F/tp, ...) of the gate block and of the up block
//   down_proj            those input columns
//   the RMSNorms         whole (replicated; partial gradients under sequence parallelism)
// A rank's heads turn with the positions of its context-parallel slice
// (rope_ at cp rank x T). Every rank draws the serial model's weights from
// its seeds: tp = N starts where tp = 1 starts. A pipeline stage holds some
// of the blocks; the first the embedding, the last the final norm and the
// head (and so the embedding too when tied: its gradients summed over the
// grid's embed group). Parameter names are the serial model's.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/tp_layers.h"
#include "comm/vocab_parallel.h"
#include "models/llama/llama.h"
#include "models/tp_model.h"

namespace eng::models {

struct LlamaTpOptions {
  bool sequence_parallel = false;
  comm::Communicator* cp = nullptr;         // context parallel: the ids are this rank's slice of each sequence
  int64_t layer_begin = 0, layer_end = -1;  // a pipeline stage's blocks (-1: to n_layer)
};

class LlamaTpBlock : public Module {
 public:
  LlamaTpBlock(const LlamaConfig& c, int layer, uint64_t seed, Device dev, comm::Communicator& tp, LlamaTpOptions o);
  // x: (B T, C) rows, or this rank's (B T / tp, C) under sequence parallelism.
  Tensor forward(const Tensor& x, int64_t B, int64_t T, const Tensor& table, const Autocast& ac,
                 AttentionImpl attention) const;
  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<comm::ColumnParallelLinear> qkv_proj, gate_up_proj;
  std::shared_ptr<comm::RowParallelLinear> o_proj, down_proj;
  const profile::Layer& range() const { return range_; }

 private:
  int64_t local_heads_, local_kv_heads_, head_size_;
  comm::Communicator* cp_;
  profile::Layer range_;
};

class LlamaTp : public TpModel {
 public:
  // Checks that n_head, n_kv_head and ffn_hidden divide by tp (one line each).
  LlamaTp(const LlamaConfig& c, uint64_t seed, Device dev, comm::Communicator& tp, LlamaTpOptions o = {});
  // ids (B, T) i32 (under cp: this rank's slice) -> this rank's logits (B T, Vp / tp).
  Tensor forward(const Tensor& ids, Recompute recompute = Recompute::no, const Autocast& ac = Autocast(),
                 std::optional<AttentionImpl> attention = std::nullopt) const;
  Tensor loss(const Tensor& ids, const Tensor& targets, Recompute recompute = Recompute::no,
              const Autocast& ac = Autocast()) const;
  // A pipeline stage's pass (as GPT2Tp's): the rows for the next stage, or the last stage's logits.
  Tensor stage_forward(const Tensor& in, const Tensor& ids, Recompute recompute = Recompute::no,
                       const Autocast& ac = Autocast(), std::optional<AttentionImpl> attention = std::nullopt) const;
  Tensor stage_loss(const Tensor& logits, const Tensor& targets) const;
  Shape stage_rows(int64_t B, int64_t T) const;
  bool first_stage() const { return begin_ == 0; }
  bool last_stage() const { return end_ == cfg_.n_layer; }
  std::vector<Tensor> partial_parameters() const override;
  const LlamaConfig& config() const { return cfg_; }

  std::shared_ptr<comm::VocabParallelEmbedding> embed_tokens;  // first stage (and last, when tied)
  std::vector<std::shared_ptr<LlamaTpBlock>> layers;
  std::shared_ptr<RMSNorm> norm;                          // last stage
  std::shared_ptr<comm::VocabParallelEmbedding> lm_head;  // last stage, untied: the head's rows, sharded as the table
  Tensor rope;

 protected:
  TpSplit split_of(const std::string& name) const override;
  Tensor shard_custom(const std::string& name, const Tensor& full) const override;
  Tensor unshard_custom(const std::string& name, const Tensor& mine) const override;

 private:
  std::vector<int64_t> row_blocks(const std::string& name) const;  // qkv_proj's and gate_up_proj's blocks
  const comm::VocabParallelEmbedding& vocab_layer() const { return embed_tokens ? *embed_tokens : *lm_head; }
  LlamaConfig cfg_;
  LlamaTpOptions opt_;
  int64_t begin_, end_;
};

}  // namespace eng::models
