// GPT-2 under tensor parallelism (gpt2_tp.h): construction with the serial
// model's seeds, the forward on local heads and MLP slices, and the
// name -> shard rules checkpoints use.
#include "models/gpt2/gpt2_tp.h"

#include <cmath>

#include "base/error.h"
#include "comm/cp_mappings.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

TpSplit GPT2Tp::split_of(const std::string& name) const {
  if (name == "wte.weight") return TpSplit::custom;
  if (ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_attn.bias")) return TpSplit::qkv_rows;
  if (ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_fc.bias")) return TpSplit::rows;
  if (ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_proj.weight")) return TpSplit::cols;
  return TpSplit::whole;
}

Tensor GPT2Tp::shard_custom(const std::string&, const Tensor& full) const { return wte->shard(full); }
Tensor GPT2Tp::unshard_custom(const std::string&, const Tensor& mine) const { return wte->unshard(mine); }

GPT2TpBlock::GPT2TpBlock(const GPT2Config& c, int layer, uint64_t seed, Device dev, comm::Communicator& tp,
                         GPT2TpOptions o)
    : local_heads_(c.n_head / tp.size()),
      head_size_(c.n_embd / c.n_head),
      cp_(o.cp),
      range_("h." + std::to_string(layer)) {
  // The serial block's seeds (gpt2.cpp), so the full weights are the same.
  const int64_t C = c.n_embd;
  const uint64_t s = seed * 7919ull + uint64_t(layer) * 101ull;
  InitOptions w{s, DType::f32, dev, 0.02f};
  InitOptions proj = w;
  proj.std = 0.02f / std::sqrt(2.0f * float(c.n_layer));
  InitOptions a = w, ap = proj, f = w, mp = proj;
  a.seed = s + 1, ap.seed = s + 2, f.seed = s + 3, mp.seed = s + 4;
  comm::TpLinearOptions col, qkv, row;
  col.sequence_parallel = qkv.sequence_parallel = row.sequence_parallel = o.sequence_parallel;
  qkv.groups = 3;
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(C, w));
  c_attn =
      register_module("attn.c_attn", std::make_shared<comm::ColumnParallelLinear>(C, 3 * C, Bias::yes, a, tp, qkv));
  attn_proj = register_module("attn.c_proj", std::make_shared<comm::RowParallelLinear>(C, C, Bias::yes, ap, tp, row));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(C, w));
  c_fc = register_module("mlp.c_fc", std::make_shared<comm::ColumnParallelLinear>(C, 4 * C, Bias::yes, f, tp, col));
  mlp_proj = register_module("mlp.c_proj", std::make_shared<comm::RowParallelLinear>(4 * C, C, Bias::yes, mp, tp, row));
}

Tensor GPT2TpBlock::forward(const Tensor& x, int64_t B, int64_t T, const Autocast& ac, AttentionImpl attention) const {
  const profile::LayerRange r(range_);
  const int64_t Cl = local_heads_ * head_size_;  // this rank's share of the channels
  // Attention on the local heads: c_attn gives (B T, 3 Cl) = my q | k | v.
  Tensor qkv = c_attn->forward(ln_1->forward(x, ac), ac);
  Tensor y = ac.cast(comm::packed_attention(qkv.reshape({B, T, 3 * Cl}), local_heads_, Causal::yes, cp_, attention));
  Tensor x1 = ac.cast(add(x, attn_proj->forward(y.reshape({B * T, Cl}), ac)));
  Tensor m = mlp_proj->forward(c_fc->forward_gelu(ln_2->forward(x1, ac), ac), ac);
  return ac.cast(add(x1, m));
}

GPT2Tp::GPT2Tp(const GPT2Config& c, uint64_t seed, Device dev, comm::Communicator& tp, GPT2TpOptions o)
    : TpModel(tp), cfg_(c), opt_(o), begin_(o.layer_begin), end_(o.layer_end < 0 ? c.n_layer : o.layer_end) {
  c.validate();
  ENGINE_CHECK(0 <= begin_ && begin_ < end_ && end_ <= c.n_layer, "gpt2 pipeline stage: blocks [", begin_, ", ", end_,
               ") of n_layer ", c.n_layer);
  const int P = tp.size();
  ENGINE_CHECK(c.n_head % P == 0, "gpt2 --tp ", P, ": n_head ", c.n_head, " does not divide by tp ", P);
  ENGINE_CHECK((4 * c.n_embd) % P == 0, "gpt2 --tp ", P, ": the MLP width 4 n_embd = ", 4 * c.n_embd,
               " does not divide by tp ", P);
  // The serial model's registration order, less what this stage lacks.
  if (first_stage() || last_stage())
    wte = register_module("wte", std::make_shared<comm::VocabParallelEmbedding>(
                                     c.vocab_size, c.n_embd, InitOptions{seed * 31 + 1, DType::f32, dev, 0.02f}, tp,
                                     o.sequence_parallel));
  if (first_stage())
    wpe = register_module(
        "wpe", std::make_shared<Embedding>(c.block_size, c.n_embd, InitOptions{seed * 31 + 2, DType::f32, dev, 0.02f}));
  for (int64_t l = begin_; l < end_; ++l)
    h.push_back(register_module("h." + std::to_string(l), std::make_shared<GPT2TpBlock>(c, int(l), seed, dev, tp, o)));
  if (last_stage())
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.n_embd, InitOptions{0, DType::f32, dev, 0.f}));
}

Shape GPT2Tp::stage_rows(int64_t B, int64_t T) const {
  return {opt_.sequence_parallel ? B * T / tp().size() : B * T, cfg_.n_embd};
}

Tensor GPT2Tp::forward(const Tensor& ids, Recompute recompute, const Autocast& ac,
                       std::optional<AttentionImpl> attention) const {
  ENGINE_CHECK(first_stage() && last_stage(), "gpt2: forward of a pipeline stage (blocks ", begin_, "..", end_ - 1,
               "): use stage_forward");
  return stage_forward(Tensor(), ids, recompute, ac, attention);
}

Tensor GPT2Tp::stage_forward(const Tensor& in, const Tensor& ids, Recompute recompute, const Autocast& ac,
                             std::optional<AttentionImpl> attention) const {
  const AttentionImpl attn = attention.value_or(cfg_.attention);
  ENGINE_CHECK(ids.ndim() == 2 && ids.dtype() == DType::i32, "gpt2: token ids must be i32 (B, T), got ", ids.desc());
  const int64_t B = ids.size(0), T = ids.size(1), C = cfg_.n_embd;
  const int64_t cp = opt_.cp ? opt_.cp->size() : 1, first = opt_.cp ? opt_.cp->rank() * T : 0;
  ENGINE_CHECK(T * cp <= cfg_.block_size, "gpt2: sequence length ", T * cp, " exceeds the model's block_size ",
               cfg_.block_size);
  ENGINE_CHECK(!opt_.sequence_parallel || (B * T) % tp().size() == 0, "gpt2 --sequence_parallel: B T = ", B * T,
               " token rows do not divide by tp ", tp().size());
  Tensor x = in;
  if (first_stage()) {
    const profile::LayerRange r(gpt2_layers().embeddings);
    Tensor pos = wpe->forward(positions_.get(B, T, ids.device(), first)).reshape({B * T, C});
    if (opt_.sequence_parallel) pos = comm::scatter_to_sp(pos, tp());
    // The token rows summed over tp (or my block of them), plus the positions, in fp32 then cast (as the serial model).
    x = ac.cast(add(wte->forward(ids), pos));
  } else {
    ENGINE_CHECK(in.defined() && in.shape() == stage_rows(B, T), "gpt2 pipeline stage (blocks ", begin_, "..", end_ - 1,
                 "): input ", in.desc(), ", expected rows ", shape_str(stage_rows(B, T)));
  }
  for (const auto& block : h) {
    if (recompute == Recompute::yes) {
      const GPT2TpBlock* b = block.get();
      const profile::LayerTag tag(b->range());  // the checkpoint node belongs to the block's layer
      x = checkpoint([b, ac, B, T, attn](const std::vector<Tensor>& xs) { return b->forward(xs[0], B, T, ac, attn); },
                     {x});
    } else {
      x = block->forward(x, B, T, ac, attn);
    }
  }
  if (!last_stage()) return x;
  const profile::LayerRange r(gpt2_layers().lm_head);
  Tensor hf = ln_f->forward(x, ac);
  // The tied lm_head is column parallel over the vocabulary: my logits only.
  hf = opt_.sequence_parallel ? comm::gather_from_sp(ac.cast(hf), tp()) : comm::copy_to_tp(ac.cast(hf), tp());
  return ac.cast(matmul(hf, ac.cast(wte->weight), Trans::N, Trans::T));
}

Tensor GPT2Tp::loss(const Tensor& ids, const Tensor& targets, Recompute recompute, const Autocast& ac) const {
  ENGINE_CHECK(targets.shape() == ids.shape(), "gpt2: targets ", targets.desc(), " do not match ids ", ids.desc());
  return stage_loss(forward(ids, recompute, ac), targets);
}

Tensor GPT2Tp::stage_loss(const Tensor& logits, const Tensor& targets) const {
  const profile::LayerRange r(gpt2_layers().loss);
  return comm::vocab_parallel_cross_entropy(Autocast().f32(logits), targets.reshape({targets.numel()}), cfg_.vocab_size,
                                            tp());
}

std::vector<Tensor> GPT2Tp::partial_parameters() const {
  std::vector<Tensor> partial;
  if (!opt_.sequence_parallel || tp().size() == 1) return partial;
  for (const auto& b : h)
    for (const Tensor& p :
         {b->ln_1->weight, b->ln_1->bias, b->ln_2->weight, b->ln_2->bias, b->attn_proj->bias, b->mlp_proj->bias})
      partial.push_back(p);
  if (ln_f) {
    partial.push_back(ln_f->weight);
    partial.push_back(ln_f->bias);
  }
  return partial;
}

}  // namespace eng::models
