// The ViT split over a tp group, as GPT-2 is (models/gpt2/gpt2_tp.h), through
// the same parallel layers (comm/tp_layers.h). What rank r of tp holds:
//   attn.qkv    heads [r H/tp, (r+1) H/tp): their q, k and v rows (3 blocks)
//   attn.proj   the same heads' input columns; bias whole
//   mlp.fc1     rows [r 4C/tp, (r+1) 4C/tp); mlp.fc2 those input columns
//   patch_embed, pos_embed, norm1, norm2, norm, head   whole (replicated)
// The blocks hold nearly all the weights and all the activations that grow
// with the image (12 of the 16 C-wide tensors a block keeps, and the
// attention), and they are what tp splits. The rest stays whole: the patch
// embedding and positions are (C_in p p + N) x C, the norms 2C each, the
// dense head C x p p C_out: in the tutorial's mp shape 6.8M of 158M
// parameters (4%); split at tp 4 they would save 82 MB of fp32 weights,
// gradients and AdamW state per rank (of 0.7 GB) for collectives in every
// step. Every tp rank computes them alike.
// Forward: the tokens (B N rows) enter each block's tp region through
// copy_to_tp (sequence parallel: every rank's rows all-gathered), attention
// runs non-causal on the local heads, and the row layers' partial sums are
// all-reduced (sequence parallel: reduce-scattered to each rank's rows).
// Under sequence parallelism the residual stream and the norms hold 1/tp of
// the rows; the positions are added before the split, and the final norm's
// rows are all-gathered for the replicated head (gather_from_sp_to_replicated).
// Context parallelism (ViTTpOptions::cp) splits the tokens instead: each
// rank embeds its slice of the patches, runs the blocks on it (attention
// gathers the keys and values of every slice), and the dense head predicts
// its own patches (the loss compares them with the same patches of the
// target); the classifier's token mean is summed over the slices.
// Every rank draws the full weights from the serial model's seeds: tp = N
// starts where tp = 1 starts. Names are the serial model's (timm's). A
// pipeline stage holds some of the blocks (ViTTpOptions), named as in the
// serial model ("blocks.5" on any stage).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/tp_layers.h"
#include "models/tp_model.h"
#include "models/vit/vit.h"

namespace eng::models {

struct ViTTpOptions {
  bool sequence_parallel = false;
  // Context parallel (comm/cp_mappings.h): this rank keeps tokens
  // [r N/cp, (r+1) N/cp) of every image; attention sees every slice's keys.
  // Null: none.
  comm::Communicator* cp = nullptr;
  // Pipeline stage: blocks [layer_begin, layer_end) only (-1: to depth); the
  // first stage (layer_begin 0) holds the patch embedding and positions, the
  // last (layer_end depth) the final norm and the head.
  int64_t layer_begin = 0, layer_end = -1;
};

class ViTTpBlock : public Module {
 public:
  ViTTpBlock(const ViTConfig& c, int layer, uint64_t seed, Device dev, comm::Communicator& tp, ViTTpOptions o);
  // x: (B N, C) rows, or this rank's (B N / tp, C) under sequence parallelism.
  Tensor forward(const Tensor& x, int64_t B, int64_t N, const Autocast& ac = Autocast()) const;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<comm::ColumnParallelLinear> qkv, fc1;
  std::shared_ptr<comm::RowParallelLinear> proj, fc2;

 private:
  int64_t local_heads_, head_size_;
  AttentionImpl attention_;
  comm::Communicator* cp_;
  profile::Layer range_;  // "blocks.3"
};

class ViTTp : public TpModel {
 public:
  // Checks that heads and the MLP width divide by tp (one-line errors naming them).
  ViTTp(const ViTConfig& c, uint64_t seed, Device dev, comm::Communicator& tp, ViTTpOptions o = {});
  // images (B, C, H, W) -> the whole output on every tp and cp rank, as ViT::forward.
  Tensor forward(const Tensor& images, const Autocast& ac = Autocast()) const;
  // The loss in fp32, the same on every tp rank. Under cp, the dense head's
  // is the mean over this rank's tokens (cp_mappings.h: the step follows
  // the mean over the cp ranks, the loss over all tokens); the classifier's
  // is the whole batch's on every cp rank.
  Tensor loss(const Tensor& images, const Tensor& targets, const Autocast& ac = Autocast()) const;
  // A pipeline stage's pass: `in` is the previous stage's output rows
  // (undefined on the first stage, which embeds the images; every stage
  // gets the images for B). Returns the rows for the next stage
  // (stage_rows), or on the last stage the normed tokens (B, N / cp, C).
  Tensor stage_forward(const Tensor& in, const Tensor& images, const Autocast& ac = Autocast()) const;
  // The last stage: the output (as forward) and the loss (as loss) of its normed tokens.
  Tensor stage_output(const Tensor& features, const Autocast& ac = Autocast()) const;
  Tensor stage_loss(const Tensor& features, const Tensor& targets, const Autocast& ac = Autocast()) const;
  // The rows a stage passes on: (B N / cp, C), or this rank's B N / cp / tp under sequence parallelism.
  Shape stage_rows(int64_t B) const;
  bool first_stage() const { return begin_ == 0; }
  bool last_stage() const { return end_ == cfg_.depth; }
  // Sequence parallel: the norms and row biases (tp_model.h).
  std::vector<Tensor> partial_parameters() const override;
  const ViTConfig& config() const { return cfg_; }

  std::shared_ptr<Linear> patch_embed;
  std::shared_ptr<Embedding> pos_embed;
  std::vector<std::shared_ptr<ViTTpBlock>> blocks;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;

 protected:
  TpSplit split_of(const std::string& name) const override;

 private:
  // This rank's tokens after the final norm: (B, N / cp, C), every tp rank alike.
  Tensor features(const Tensor& images, const Autocast& ac) const;
  int64_t cp() const { return opt_.cp ? opt_.cp->size() : 1; }
  ViTConfig cfg_;
  ViTTpOptions opt_;
  int64_t begin_, end_;  // this stage's blocks
  PositionIds positions_;
};

}  // namespace eng::models
