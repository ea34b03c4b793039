// The vocab-parallel cross-entropy (vocab_parallel.h): the engine's sharded
// loss (engine/ops/cross_entropy_sharded.cpp) with the tp group's all-reduces.
#include "comm/vocab_parallel.h"

#include "base/error.h"

namespace eng::comm {

int64_t padded_vocab(int64_t vocab, int tp) {
  const int64_t m = 128 * int64_t(tp);
  return (vocab + m - 1) / m * m;
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
