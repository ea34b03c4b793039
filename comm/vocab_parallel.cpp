// The vocab-parallel cross-entropy (vocab_parallel.h): the engine's sharded
// loss (engine/ops/cross_entropy_sharded.cpp) with the tp group's all-reduces.
#include "comm/vocab_parallel.h"

#include "base/error.h"
#include "comm/tp_layers.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"

namespace eng::comm {

int64_t padded_vocab(int64_t vocab, int tp) {
  const int64_t m = 128 * int64_t(tp);
  return (vocab + m - 1) / m * m;
}

namespace {
// table (vocab, C) with zero rows appended up to `rows`.
Tensor padded(const Tensor& table, int64_t rows) {
  NoGradGuard no_grad;
  const int64_t extra = rows - table.size(0);
  if (extra == 0) return table.detach();
  return concat({table.detach(), Tensor::zeros({extra, table.size(1)}, table.dtype(), table.device())}, 0);
}
}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t C, const InitOptions& init, Communicator& tp,
                                               bool sequence_parallel)
    : tp_(&tp), vocab_(vocab), sp_(sequence_parallel) {
  const Embedding full(vocab, C, init);
  weight = register_parameter("weight", shard_rows(padded(full.weight, padded_vocab(vocab, tp.size())), 1, tp));
}

Tensor VocabParallelEmbedding::forward(const Tensor& ids) const {
  const Tensor partial = embedding(weight, ids, VocabShard{vocab_start(), vocab_});
  const Tensor rows = partial.reshape({ids.numel(), weight.size(1)});
  return sp_ ? reduce_scatter_to_sp(rows, *tp_) : reduce_from_tp(rows, *tp_);
}

Tensor VocabParallelEmbedding::unshard(const Tensor& mine) const {
  NoGradGuard no_grad;
  return narrow(unshard_rows(mine, 1, *tp_), 0, 0, vocab_).detach();
}

Tensor VocabParallelEmbedding::shard(const Tensor& table) const {
  ENGINE_CHECK(table.ndim() == 2 && table.size(0) == vocab_ && table.size(1) == weight.size(1),
               "VocabParallelEmbedding: table ", table.desc(), " is not (", vocab_, ", ", weight.size(1), ")");
  return shard_rows(padded(table, padded_vocab(vocab_, tp_->size())), 1, *tp_);
}

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, Communicator& tp,
                                    int32_t ignore_index) {
  ENGINE_CHECK(logits.ndim() == 2 && logits.size(1) * tp.size() >= vocab, "vocab_parallel_cross_entropy: logits ",
               logits.desc(), " on each of ", tp.size(), " ranks cannot hold a vocabulary of ", vocab);
  const VocabShard shard{tp.rank() * logits.size(1), vocab};
  return cross_entropy_sharded(
      logits, targets, shard,
      [&tp](Tensor& t, ShardReduce op) {
        tp.all_reduce(t, op == ShardReduce::max ? ReduceOp::max : ReduceOp::sum).wait();
      },
      ignore_index);
}

}  // namespace eng::comm
