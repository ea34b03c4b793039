// Data parallelism (PyTorch's DistributedDataParallel, in small): every dp
// rank holds the whole model, computes gradients on its part of the batch,
// and the gradients are averaged over dp before the optimizer step, so every
// replica takes the same step and stays identical.
//
// Buckets: one all-reduce per parameter would pay the collective's latency
// hundreds of times per step; one for all gradients would wait for the whole
// backward. So gradients are copied into flat buckets (25 MiB by default; the
// first 1 MiB, so communication starts early), filled in reverse registration
// order, which is roughly the order the backward finishes them. A bucket's
// all-reduce starts as soon as its last gradient is final (the parameter's
// final-gradient hook), on the communication stream on cuda, while the
// backward of earlier layers goes on; on cpu, MPI's non-blocking collective
// makes progress whenever a later hook polls it. Every rank builds the same
// buckets from the same parameter list and starts them in bucket order.
//
// Gradient accumulation: only the last micro-step's backward communicates
// (set_sync(false) before the others: PyTorch's no_sync()).
//
// naive mode (train --ddp naive): no buckets and no hooks; finish() runs
// ddp_naive.h's one all-reduce per gradient after the backward. The same
// averages, for comparison and for reading first.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/tensor.h"

namespace eng::comm {

struct DdpOptions {
  bool naive = false;          // one all-reduce per gradient in finish() (ddp_naive.h); no buckets, no shard
  double bucket_mb = 25;       // bucket capacity (MiB)
  double first_bucket_mb = 1;  // the first bucket's (the last layers' gradients)
  // ZeRO-1 (zero.h): each bucket is padded to a multiple of dp and
  // reduce-scattered (averaged) into this rank's shard; no copy back.
  bool shard = false;
  // Parameters that each get a bucket of their own. GPT-2's tied token table
  // under pipeline parallelism: alone in its bucket on the first and on the
  // last stage, its buckets there line up element for element, and so do
  // their ZeRO shards, which the two stages then sum.
  std::vector<Tensor> alone;
  // Shard mode: every parameter starts at a multiple of `align` elements in
  // its bucket and buckets are padded to a multiple of dp x align, so the
  // shards cut no block of `align` elements of a parameter (ZeRO with 8-bit
  // AdamW: its quantization blocks of 256 stay whole on one rank).
  int64_t align = 1;
};

// A bucket as ZeRO sees it: the parameters whose gradients it holds, where,
// and (shard mode) this rank's slice of the reduced gradients.
struct DdpBucket {
  Tensor flat;                  // every gradient side by side, padded to a multiple of dp (shard mode)
  Tensor shard;                 // shard mode: the reduced elements [rank*n, (rank+1)*n) of flat, n = flat/dp
  std::vector<size_t> params;   // indices into the parameter list
  std::vector<int64_t> offset;  // element offset of each in flat
};

class DistributedDataParallel {
 public:
  // params in registration order (model.parameters()); `comm` is the dp
  // group's communicator and outlives this object.
  DistributedDataParallel(std::vector<Tensor> params, Communicator& comm, DdpOptions opt = {});
  ~DistributedDataParallel();

  // Rank 0's values to every rank (call once, before training).
  void broadcast_parameters();
  // Whether the next backward's gradients are final for this step (the last
  // micro-step): only then do the hooks fill buckets and start all-reduces.
  void set_sync(bool sync);
  // After the last backward: waits for every bucket's all-reduce and writes
  // the averaged gradients back into the parameters' .grad (shard mode: waits
  // for the reduce-scatters; the shards hold the result).
  void finish();

  const std::vector<Tensor>& parameters() const;
  const std::vector<DdpBucket>& buckets() const;
  const DdpBucket& bucket_holding(const Tensor& param) const;  // the bucket of one of the parameters
  int num_buckets() const;                                     // 0 in naive mode
  std::string bucket_summary() const;  // "3 buckets (1.0, 25.0, 4.2 MiB)", naive: "148 all-reduces after the backward"

 private:
  struct State;
  std::shared_ptr<State> s_;  // shared with the hooks
};

}  // namespace eng::comm
