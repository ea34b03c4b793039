// The vocabulary split over tp (Megatron-LM's vocab-parallel layers): rank r
// owns the contiguous ids [r V/tp, (r + 1) V/tp) of a vocabulary padded to a
// multiple of 128 tp (padded_vocab), so every shard is the same size and
// GEMM-friendly. Ids at or past the real vocabulary are padding: never a
// target, never predicted (they take no part in the softmax).
#pragma once
#include <cstdint>

#include "comm/communicator.h"
#include "engine/ops.h"

namespace eng::comm {

// vocab rounded up to a multiple of 128 tp.
int64_t padded_vocab(int64_t vocab, int tp);

// Cross-entropy of logits (N, padded/tp), this rank's columns of the full
// logits, against targets (N) in [0, vocab): three small all-reduces over tp
// (the row max, the sum of exponentials with the target logit), never the
// full logits. The same loss on every rank; the backward is local.
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, Communicator& tp,
                                    int32_t ignore_index = -100);

}  // namespace eng::comm
