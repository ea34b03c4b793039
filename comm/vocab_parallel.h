// The vocabulary split over tp (Megatron-LM's vocab-parallel layers): rank r
// owns the contiguous ids [r V/tp, (r + 1) V/tp) of a vocabulary padded to a
// multiple of 128 tp (padded_vocab), so every shard is the same size and
// GEMM-friendly. Ids at or past the real vocabulary are padding: never a
// target, never predicted (they take no part in the softmax).
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"

namespace eng::comm {

// vocab rounded up to a multiple of 128 tp.
int64_t padded_vocab(int64_t vocab, int tp);

// The token embedding with its (vocab, C) table padded with zero rows to
// padded_vocab and split by rows: each rank looks up the ids it owns (zero
// rows for the others) and the partial rows are summed over tp (under
// sequence parallelism reduce-scattered: this rank gets its block of the
// B T token rows). Every rank draws the whole table from the seed, as the
// serial Embedding, and keeps its rows. The padding rows stay zero: no id
// reaches them and the vocab-parallel loss gives them no gradient.
class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t C, const InitOptions& init, Communicator& tp,
                         bool sequence_parallel = false);
  // ids (B, T) -> (B T, C), or (B T / tp, C) under sequence parallelism.
  Tensor forward(const Tensor& ids) const;
  int64_t vocab() const { return vocab_; }
  int64_t vocab_start() const { return weight.size(0) * tp_->rank(); }
  // A (vocab, C) tensor <-> this rank's (padded_vocab / tp, C) rows: the
  // weight, its gradient or an optimizer moment. unshard is collective.
  Tensor shard(const Tensor& full) const;
  Tensor unshard(const Tensor& mine) const;
  Tensor full_weight() const { return unshard(weight); }
  void load_full(const Tensor& table) { weight.copy_from(shard(table)); }
  Tensor weight;  // (padded_vocab / tp, C)

 private:
  Communicator* tp_;
  int64_t vocab_;
  bool sp_;
};

// Cross-entropy of logits (N, padded/tp), this rank's columns of the full
// logits, against targets (N) in [0, vocab): three small all-reduces over tp
// (the row max, the sum of exponentials with the target logit), never the
// full logits. The same loss on every rank; the backward is local.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, Communicator& tp,
                                    int32_t ignore_index = -100);

}  // namespace eng::comm
