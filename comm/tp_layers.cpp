// ColumnParallelLinear and RowParallelLinear (tp_layers.h), and the shard
// helpers they and the checkpoints use.
#include "comm/tp_layers.h"

#include "base/error.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng::comm {

namespace {
std::vector<int64_t> equal_blocks(int64_t rows, int groups) {
  ENGINE_CHECK(groups >= 1 && rows % groups == 0, "tp: ", rows, " rows in ", groups, " equal blocks");
  return std::vector<int64_t>(size_t(groups), rows / groups);
}
}  // namespace

Tensor shard_blocks(const Tensor& full, const std::vector<int64_t>& blocks, const Communicator& tp) {
  NoGradGuard no_grad;
  const int64_t P = tp.size();
  int64_t start = 0;
  std::vector<Tensor> parts;
  for (int64_t block : blocks) {
    ENGINE_CHECK(block % P == 0, "tp: a block of ", block, " rows of ", full.desc(), " does not divide by tp ", P);
    parts.push_back(narrow(full, 0, start + tp.rank() * (block / P), block / P));
    start += block;
  }
  ENGINE_CHECK(start == full.size(0), "tp: blocks of ", start, " rows for ", full.desc());
  return (parts.size() == 1 ? parts[0] : concat(parts, 0)).detach();
}

Tensor unshard_blocks(const Tensor& shard, const std::vector<int64_t>& blocks, Communicator& tp) {
  NoGradGuard no_grad;
  const Tensor all = gather_from_sp(shard, tp);  // rank r's shard at rows [r k, (r + 1) k)
  if (blocks.size() == 1 || tp.size() == 1) return all.detach();
  const int64_t k = shard.size(0), P = tp.size();
  std::vector<Tensor> parts;
  int64_t off = 0;  // the block's first row within a shard
  for (int64_t block : blocks) {
    for (int64_t r = 0; r < P; ++r) parts.push_back(narrow(all, 0, r * k + off, block / P));
    off += block / P;
  }
  return concat(parts, 0).detach();
}

Tensor shard_rows(const Tensor& full, int groups, const Communicator& tp) {
  ENGINE_CHECK(groups >= 1 && full.size(0) % (groups * tp.size()) == 0, "tp: dim 0 of ", full.desc(), " (", groups,
               groups == 1 ? " block" : " blocks", ") does not divide by tp ", tp.size());
  return shard_blocks(full, equal_blocks(full.size(0), groups), tp);
}

Tensor unshard_rows(const Tensor& shard, int groups, Communicator& tp) {
  return unshard_blocks(shard, equal_blocks(shard.size(0) * tp.size(), groups), tp);
}

Tensor shard_cols(const Tensor& full, const Communicator& tp) {
  NoGradGuard no_grad;
  const int64_t C = full.size(-1), P = tp.size();
  ENGINE_CHECK(C % P == 0, "tp: the last dim of ", full.desc(), " does not divide by tp ", P);
  return narrow(full, -1, tp.rank() * (C / P), C / P).detach();
}

Tensor unshard_cols(const Tensor& shard, Communicator& tp) {
  NoGradGuard no_grad;
  return gather_from_tp(shard, tp).detach();
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, Bias has_bias, const InitOptions& init,
                                           Communicator& tp, TpLinearOptions opt)
    : tp_(&tp), opt_(opt) {
  if (opt_.blocks.empty()) {
    ENGINE_CHECK(opt.groups >= 1 && out % (int64_t(opt.groups) * tp.size()) == 0, "ColumnParallelLinear: ", out,
                 " output features in ", opt.groups, " block(s) do not divide by tp ", tp.size());
    opt_.blocks = equal_blocks(out, opt.groups);
  }
  ENGINE_CHECK(!(opt.gather_output && opt.sequence_parallel),
               "ColumnParallelLinear: gather_output and sequence_parallel exclude each other");
  const Linear full(in, out, has_bias, init);  // every rank draws the same full weights
  weight = register_parameter("weight", shard_blocks(full.weight, opt_.blocks, tp));
  if (has_bias == Bias::yes) bias = register_parameter("bias", shard_blocks(full.bias, opt_.blocks, tp));
}

Tensor ColumnParallelLinear::input(const Tensor& x) const {
  return opt_.sequence_parallel ? gather_from_sp(x, *tp_) : copy_to_tp(x, *tp_);
}

Tensor ColumnParallelLinear::forward(const Tensor& x, const Autocast& ac) const {
  // Cast before communicating: a 16-bit gather moves half the bytes.
  Tensor y = ac.cast(linear(input(ac.cast(x)), ac.cast(weight), ac.cast(bias)));
  return opt_.gather_output ? gather_from_tp(y, *tp_) : y;
}

Tensor ColumnParallelLinear::forward_gelu(const Tensor& x, const Autocast& ac) const {
  ENGINE_CHECK(!opt_.gather_output, "ColumnParallelLinear: forward_gelu does not gather its output");
  // As Linear::forward_gelu: the cpu under autocast rounds between the GEMM and the GELU.
  if (!bias.defined() || (ac.active() && x.device().type == DeviceType::cpu)) return ac.cast(gelu(forward(x, ac)));
  return ac.cast(linear_gelu(input(ac.cast(x)), ac.cast(weight), ac.cast(bias)));
}

Tensor ColumnParallelLinear::full_weight() const { return unshard_blocks(weight, opt_.blocks, *tp_); }
Tensor ColumnParallelLinear::full_bias() const { return unshard_blocks(bias, opt_.blocks, *tp_); }

void ColumnParallelLinear::load_full(const Tensor& w, const Tensor& b) {
  weight.copy_from(shard_blocks(w, opt_.blocks, *tp_));
  if (bias.defined()) bias.copy_from(shard_blocks(b, opt_.blocks, *tp_));
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, Bias has_bias, const InitOptions& init, Communicator& tp,
                                     TpLinearOptions opt)
    : tp_(&tp), opt_(opt) {
  ENGINE_CHECK(in % tp.size() == 0, "RowParallelLinear: ", in, " input features do not divide by tp ", tp.size());
  const Linear full(in, out, has_bias, init);
  weight = register_parameter("weight", shard_cols(full.weight, tp));
  if (has_bias == Bias::yes) bias = register_parameter("bias", full.bias.detach().clone());
}

Tensor RowParallelLinear::forward(const Tensor& x, const Autocast& ac) const {
  const Tensor xs = opt_.input_is_parallel ? x : scatter_to_tp(x, *tp_);
  const Tensor partial = linear(ac.cast(xs), ac.cast(weight));
  // The partial products summed over tp (16-bit under autocast, as Megatron).
  Tensor y =
      opt_.sequence_parallel ? reduce_scatter_to_sp(ac.cast(partial), *tp_) : reduce_from_tp(ac.cast(partial), *tp_);
  return bias.defined() ? ac.cast(add_bias(y, ac.cast(bias))) : y;
}

Tensor RowParallelLinear::full_weight() const { return unshard_cols(weight, *tp_); }

void RowParallelLinear::load_full(const Tensor& w, const Tensor& b) {
  weight.copy_from(shard_cols(w, *tp_));
  if (bias.defined()) bias.copy_from(b);
}

}  // namespace eng::comm
