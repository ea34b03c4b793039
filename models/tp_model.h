// What every model split over a tp group shares (GPT-2: models/gpt2/gpt2_tp.h,
// the ViT: models/vit/vit_tp.h): each parameter of the serial model is
// either whole on every tp rank or split by one rule, and the name says
// which. From that rule follow the shard <-> full conversions checkpoints
// and tests use, the gradients that are partial per rank under sequence
// parallelism, and the parameters a global norm counts once.
//   whole     replicated (layernorms, embeddings, row-parallel biases, heads)
//   rows      split by output features (a column-parallel layer)
//   qkv_rows  rows of each of three blocks [q; k; v]: a rank holds whole heads
//   cols      split by input features (a row-parallel layer's weight)
//   custom    the model's own rule (GPT-2's vocabulary-parallel table)
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "engine/nn/module.h"

namespace eng::models {

enum class TpSplit : uint8_t { whole, rows, qkv_rows, cols, custom };

class TpModel : public Module {
 public:
  explicit TpModel(comm::Communicator& tp) : tp_(&tp) {}
  comm::Communicator& tp() const { return *tp_; }
  // Parameter `name`'s full tensor <-> this rank's shard, for any tensor of
  // its shape (the value, its gradient, an optimizer moment). unshard is
  // collective over tp.
  Tensor shard(const std::string& name, const Tensor& full) const;
  Tensor unshard(const std::string& name, const Tensor& mine) const;
  // The serial model's state: every parameter gathered to its full shape,
  // by name, in registration order. Collective over tp.
  std::vector<std::pair<std::string, Tensor>> full_state() const;
  // Whether parameter `name` is split over tp (any rule but whole).
  bool is_split(const std::string& name) const { return split_of(name) != TpSplit::whole; }
  // Loads a full state (names and shapes of the serial model): this rank's
  // shards of the parameters it holds (a pipeline stage: its own).
  void load_full_state(const std::vector<std::pair<std::string, Tensor>>& state);
  // The parameters every tp rank holds whole: their gradients agree across
  // tp (after sync_partial_grads), so a global norm counts them once.
  std::vector<Tensor> replicated_parameters() const;
  // Replicated parameters whose gradients are partial per rank (sequence
  // parallel: they see only this rank's token rows); none otherwise.
  virtual std::vector<Tensor> partial_parameters() const = 0;
  // Sums the partial gradients over tp. Call after backward.
  void sync_partial_grads();

 protected:
  virtual TpSplit split_of(const std::string& name) const = 0;
  virtual Tensor shard_custom(const std::string& name, const Tensor& full) const;
  virtual Tensor unshard_custom(const std::string& name, const Tensor& mine) const;

 private:
  comm::Communicator* tp_;
};

bool ends_with(const std::string& s, const std::string& suffix);

}  // namespace eng::models
