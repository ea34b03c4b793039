// The process grid: world = dp x cp x tp, tp ranks adjacent, then cp, then dp:
//   global rank = tp_rank + tp * (cp_rank + cp * dp_rank),
// so on a node of 8 GPUs with tp = 8 the tensor-parallel group (the chattiest:
// several collectives per layer) stays on the node's NVLink, the context-
// parallel group (two collectives per layer, of keys and values) comes next,
// and the data-parallel group (one gradient all-reduce per step) spans
// nodes. (Megatron-LM orders its groups the same way.) Groups: "world";
// "tp" (one tp group per (dp, cp)); "cp" (the ranks holding the same tp
// shard of the same samples, each a slice of the sequence); "dp" (the same
// tp shard and sequence slice of other samples); "dpcp" (dp x cp: every
// rank holding the same tp shard, over which parameter gradients are
// averaged: parameters are replicated over cp as over dp).
#pragma once
#include "comm/group.h"

namespace eng::comm {

class Grid {
 public:
  // Collective over the world; throws if tp x cp does not divide the world size.
  explicit Grid(int tp = 1, int cp = 1);
  int dp() const { return dp_.size(); }
  int cp() const { return cp_.size(); }
  int tp() const { return tp_.size(); }
  int dp_rank() const { return dp_.rank(); }
  int cp_rank() const { return cp_.rank(); }
  int tp_rank() const { return tp_.rank(); }
  const Group& world_group() const { return world_; }
  const Group& dp_group() const { return dp_; }
  const Group& cp_group() const { return cp_; }
  const Group& tp_group() const { return tp_; }
  const Group& dp_cp_group() const { return dp_cp_; }

 private:
  Group world_, dp_, cp_, tp_, dp_cp_;
};

}  // namespace eng::comm
