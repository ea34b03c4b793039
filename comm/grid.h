// The process grid: world = dp x tp, tp ranks adjacent,
//   global rank = tp_rank + tp * dp_rank,
// so on a node of 8 GPUs with tp = 8 the tensor-parallel group (the chattiest:
// several collectives per layer) stays on the node's NVLink, and the
// data-parallel group (one gradient all-reduce per step) spans nodes.
// (Megatron-LM orders its groups the same way.) Groups: "world", "dp" (the
// ranks holding the same tp shard: gradients are averaged over it), "tp".
#pragma once
#include "comm/group.h"

namespace eng::comm {

class Grid {
 public:
  explicit Grid(int tp = 1);  // collective over the world; throws if tp does not divide the world size
  int dp() const { return dp_.size(); }
  int tp() const { return tp_.size(); }
  int dp_rank() const { return dp_.rank(); }
  int tp_rank() const { return tp_.rank(); }
  const Group& world_group() const { return world_; }
  const Group& dp_group() const { return dp_; }
  const Group& tp_group() const { return tp_; }

 private:
  Group world_, dp_, tp_;
};

}  // namespace eng::comm
