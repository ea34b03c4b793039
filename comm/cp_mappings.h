// Context parallelism's communication, as autograd ops over the cp group:
// each cp rank holds a contiguous slice of the sequence (rank r: positions
// [r T/cp, (r+1) T/cp) of every sample), and everything but attention is
// per token, so only attention talks: a rank's queries need every key and
// value (the all-gather form of the SC24 NERSC tutorial and of Megatron's
// context parallelism before its ring).
//
//   op                    forward                          backward
//   gather_seq_from_cp    all-gather along dim 1 (the      reduce-scatter along dim 1: every
//                         sequence), rank order            rank's gradient of the whole summed, my slice kept
//   all_reduce_cp         sum over cp                      sum over cp
//   cp_attention          my queries at offset r T/cp against the gathered keys and values
//
// The convention that makes these the right adjoints: each cp rank
// back-propagates its own loss (the mean over its tokens, or a value every
// cp rank computes alike), and parameter gradients are then averaged over
// cp (with dp: DistributedDataParallel on the dp x cp group), so the step
// follows the mean of the cp ranks' losses, which for equal slices is the
// loss over all tokens. gather_seq_from_cp's adjoint sums what every rank's
// queries did to my keys; all_reduce_cp's sums what every rank's copy of
// the result did (a token mean summed over the slices, then a replicated
// classifier).
//
// Bytes per attention layer: forward K and V all-gathered, 2 B T C_l
// elements received per rank (C_l = this tp rank's channels) of which the
// (cp - 1)/cp from others; backward their gradients reduce-scattered, the
// same again. A group of one makes every op an identity (or plain attention).
#pragma once
#include "comm/communicator.h"
#include "engine/ops.h"

namespace eng::comm {

Tensor gather_seq_from_cp(const Tensor& x, Communicator& cp);
Tensor all_reduce_cp(const Tensor& x, Communicator& cp);
// q, k, v: (B, T/cp, NH, HS), this rank's slice; returns this rank's output rows.
Tensor cp_attention(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal, Communicator& cp,
                    AttentionImpl impl = AttentionImpl::ours);
// Attention on the packed output of a (column-parallel) qkv projection, qkv
// (B, T, 3 C) with q | k | v side by side: attention_qkv reads them in place;
// with a cp group (nullptr: none) they are split, k and v gathered over it.
// n_kv_head (grouped K/V heads; 0: n_head): qkv is (B, T, (n_head + 2
// n_kv_head) HS), as attention_qkv takes it.
Tensor packed_attention(const Tensor& qkv, int64_t n_head, Causal causal, Communicator* cp,
                        AttentionImpl impl = AttentionImpl::ours, int64_t n_kv_head = 0);
// My slice of dim `dim` (T/cp positions), not recorded: inputs (ids,
// targets, patches) that every cp rank holds whole; i32 ones on the host. A length that does not
// divide by cp is a one-line error naming it.
Tensor cp_slice(const Tensor& x, int dim, const Communicator& cp);

}  // namespace eng::comm
