// ColumnParallelLinear and RowParallelLinear (tp_layers.h), and the shard
// helpers they and the checkpoints use.
#include "comm/tp_layers.h"

#include "base/error.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng::comm {

Tensor shard_rows(const Tensor& full, int groups, const Communicator& tp) {
  NoGradGuard no_grad;
  const int64_t R = full.size(0), P = tp.size();
  ENGINE_CHECK(groups >= 1 && R % (groups * P) == 0, "tp: dim 0 of ", full.desc(), " (", groups,
               groups == 1 ? " block" : " blocks", ") does not divide by tp ", P);
  const int64_t block = R / groups, n = block / P;
  std::vector<Tensor> parts;
  for (int g = 0; g < groups; ++g) parts.push_back(narrow(full, 0, g * block + tp.rank() * n, n));
  return (groups == 1 ? parts[0] : concat(parts, 0)).detach();
}

Tensor unshard_rows(const Tensor& shard, int groups, Communicator& tp) {
  NoGradGuard no_grad;
  const Tensor all = gather_from_sp(shard, tp);  // rank r's shard at rows [r k, (r + 1) k)
  if (groups == 1 || tp.size() == 1) return all.detach();
  const int64_t k = shard.size(0), n = k / groups;
  std::vector<Tensor> parts;
  for (int g = 0; g < groups; ++g)
    for (int r = 0; r < tp.size(); ++r) parts.push_back(narrow(all, 0, r * k + g * n, n));
  return concat(parts, 0).detach();
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
  ENGINE_CHECK(opt.groups >= 1 && out % (int64_t(opt.groups) * tp.size()) == 0, "ColumnParallelLinear: ", out,
               " output features in ", opt.groups, " block(s) do not divide by tp ", tp.size());
  ENGINE_CHECK(!(opt.gather_output && opt.sequence_parallel),
               "ColumnParallelLinear: gather_output and sequence_parallel exclude each other");
  const Linear full(in, out, has_bias, init);  // every rank draws the same full weights
  weight = register_parameter("weight", shard_rows(full.weight, opt.groups, tp));
  if (has_bias == Bias::yes) bias = register_parameter("bias", shard_rows(full.bias, opt.groups, tp));
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

Tensor ColumnParallelLinear::full_weight() const { return unshard_rows(weight, opt_.groups, *tp_); }
Tensor ColumnParallelLinear::full_bias() const { return unshard_rows(bias, opt_.groups, *tp_); }

void ColumnParallelLinear::load_full(const Tensor& w, const Tensor& b) {
  weight.copy_from(shard_rows(w, opt_.groups, *tp_));
  if (bias.defined()) bias.copy_from(shard_rows(b, opt_.groups, *tp_));
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
