// The process grid: world = pp x dp x cp x tp, tp ranks adjacent, then cp,
// then dp, pipeline stages outermost:
//   global rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank)),
// so on a node of 8 GPUs with tp = 8 the tensor-parallel group (the chattiest:
// several collectives per layer) stays on the node's NVLink, the context-
// parallel group (two collectives per layer, of keys and values) comes next,
// then the data-parallel group (one gradient all-reduce per step), and the
// pipeline stages, which move only the activations at their borders, span
// the slowest links. (Megatron-LM orders its groups the same way.) Groups:
// "world"; "tp" (one tp group per (pp, dp, cp)); "cp" (the ranks holding the
// same tp shard of the same samples, each a slice of the sequence); "dp"
// (the same stage, tp shard and sequence slice of other samples); "dpcp"
// (dp x cp: every rank holding the same stage and tp shard, over which
// parameter gradients are averaged: parameters are replicated over cp as
// over dp); "pp" (the stages of one (dp, cp, tp) coordinate, in stage
// order); "embed" (the first and the last stage of a pp group, which both
// hold GPT-2's tied token embedding; a group of one on the middle stages
// and when pp = 1).
#pragma once
#include "comm/group.h"

namespace eng::comm {

class Grid {
 public:
  // Collective over the world; throws if pp x tp x cp does not divide the world size.
  explicit Grid(int tp = 1, int cp = 1, int pp = 1);
  int dp() const { return dp_.size(); }
  int cp() const { return cp_.size(); }
  int tp() const { return tp_.size(); }
  int pp() const { return pp_.size(); }
  int dp_rank() const { return dp_.rank(); }
  int cp_rank() const { return cp_.rank(); }
  int tp_rank() const { return tp_.rank(); }
  int pp_rank() const { return pp_.rank(); }  // this rank's stage
  const Group& world_group() const { return world_; }
  const Group& dp_group() const { return dp_; }
  const Group& cp_group() const { return cp_; }
  const Group& tp_group() const { return tp_; }
  const Group& dp_cp_group() const { return dp_cp_; }
  const Group& pp_group() const { return pp_; }
  const Group& embed_group() const { return embed_; }

 private:
  Group world_, dp_, cp_, tp_, dp_cp_, pp_, embed_;
};

}  // namespace eng::comm
