// Megatron-LM's parallel linear layers over the tp group (tp_mappings.h).
//
//   ColumnParallelLinear   y = x W^T + b, W (out, in) split by output
//                          features: rank r holds rows [r out/tp, (r+1) out/tp)
//                          of W and b; its output is its slice of y's last dim.
//   RowParallelLinear      W split by input features: rank r holds columns
//                          [r in/tp, (r+1) in/tp) of W, takes its slice of x's
//                          last dim, and the partial products are summed over
//                          tp; the bias (whole on every rank) is added once,
//                          after the sum.
//
// A column layer followed by a row layer (the MLP; attention's c_attn then
// c_proj) needs one all-reduce forward and one backward, and nothing between.
//
// Sequence parallel: outside the pair each rank holds 1/tp of the token rows
// (x flattened to (rows, in)). The column layer all-gathers the rows instead
// of copy_to_tp; the row layer reduce-scatters them instead of all-reducing,
// and its bias is then added to this rank's rows only, so the bias gradient
// is partial on each rank: the caller sums it over tp before the optimizer
// (as for layernorm weights in the sequence-parallel region).
//
// Initialisation: every rank builds the full layer from the same seed (as
// the serial Linear would) and keeps its shard, so a model at tp = N starts
// from the same weights as at tp = 1. Parameter names are Linear's
// ("weight", "bias"); full_weight()/full_bias() gather them back.
//
// groups: the output is `groups` blocks side by side, each split over tp, and
// a rank holds its slice of every block. GPT-2's c_attn is (3C, C) = [q; k; v]
// with groups = 3, so a rank gets whole heads' q, k and v. blocks: the same
// for blocks of unequal rows (a Llama's [q; k; v] with fewer K/V heads).
#pragma once
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "engine/nn/layers.h"

namespace eng::comm {

struct TpLinearOptions {
  bool sequence_parallel = false;
  bool gather_output = false;     // column: all-gather the output's last dim (not with sequence_parallel)
  bool input_is_parallel = true;  // row: x is already split along its last dim (else scatter_to_tp first)
  int groups = 1;                 // column: see above
  std::vector<int64_t> blocks;    // column: the blocks' rows (empty: `groups` equal blocks)
};

class ColumnParallelLinear : public Module {
 public:
  ColumnParallelLinear(int64_t in, int64_t out, Bias bias, const InitOptions& init, Communicator& tp,
                       TpLinearOptions opt = {});
  Tensor forward(const Tensor& x, const Autocast& ac = Autocast()) const;
  // gelu(forward(x)), the GELU fused into the GEMM where Linear fuses it.
  Tensor forward_gelu(const Tensor& x, const Autocast& ac = Autocast()) const;
  Tensor full_weight() const;  // collective over tp
  Tensor full_bias() const;    // collective over tp
  // This rank's shard of full tensors (a Hugging Face checkpoint).
  void load_full(const Tensor& weight, const Tensor& bias);
  Tensor weight, bias;  // (out/tp, in), (out/tp)

 private:
  Tensor input(const Tensor& x) const;
  Communicator* tp_;
  TpLinearOptions opt_;
};

class RowParallelLinear : public Module {
 public:
  RowParallelLinear(int64_t in, int64_t out, Bias bias, const InitOptions& init, Communicator& tp,
                    TpLinearOptions opt = {});
  Tensor forward(const Tensor& x, const Autocast& ac = Autocast()) const;
  Tensor full_weight() const;  // collective over tp
  void load_full(const Tensor& weight, const Tensor& bias);
  Tensor weight, bias;  // (out, in/tp), (out)

 private:
  Communicator* tp_;
  TpLinearOptions opt_;
};

// Shards and their inverses (collective over tp), for layers, checkpoints
// and tests: rows of `groups` blocks, and columns (the last dim).
Tensor shard_rows(const Tensor& full, int groups, const Communicator& tp);
Tensor unshard_rows(const Tensor& shard, int groups, Communicator& tp);
// The same for blocks of the given full rows (each divisible by tp).
Tensor shard_blocks(const Tensor& full, const std::vector<int64_t>& blocks, const Communicator& tp);
Tensor unshard_blocks(const Tensor& shard, const std::vector<int64_t>& blocks, Communicator& tp);
Tensor shard_cols(const Tensor& full, const Communicator& tp);
Tensor unshard_cols(const Tensor& shard, Communicator& tp);

}  // namespace eng::comm
