// The ViT under tensor parallelism (vit_tp.h): the serial model's seeds,
// the blocks on local heads and MLP slices, the replicated rest.
#include "models/vit/vit_tp.h"

#include "base/error.h"
#include "comm/cp_mappings.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

ViTTpBlock::ViTTpBlock(const ViTConfig& c, int layer, uint64_t seed, Device dev, comm::Communicator& tp, ViTTpOptions o)
    : local_heads_(c.heads / tp.size()),
      head_size_(c.embed / c.heads),
      attention_(c.attention),
      cp_(o.cp),
      range_("blocks." + std::to_string(layer)) {
  // The serial block's seeds (vit.cpp), so the full weights are the same.
  const int64_t C = c.embed;
  const uint64_t s = seed * 7919ull + uint64_t(layer) * 101ull;
  auto w = [&](uint64_t k) { return InitOptions{s + k, DType::f32, dev, 0.02f}; };
  comm::TpLinearOptions col, qkv3, row;
  col.sequence_parallel = qkv3.sequence_parallel = row.sequence_parallel = o.sequence_parallel;
  qkv3.groups = 3;
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(C, w(0), 1e-6));
  qkv = register_module("attn.qkv", std::make_shared<comm::ColumnParallelLinear>(C, 3 * C, Bias::yes, w(1), tp, qkv3));
  proj = register_module("attn.proj", std::make_shared<comm::RowParallelLinear>(C, C, Bias::yes, w(2), tp, row));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(C, w(0), 1e-6));
  const int64_t F = c.mlp_ratio * C;
  fc1 = register_module("mlp.fc1", std::make_shared<comm::ColumnParallelLinear>(C, F, Bias::yes, w(3), tp, col));
  fc2 = register_module("mlp.fc2", std::make_shared<comm::RowParallelLinear>(F, C, Bias::yes, w(4), tp, row));
}

Tensor ViTTpBlock::forward(const Tensor& x, int64_t B, int64_t N, const Autocast& ac) const {
  const profile::LayerRange r(range_);
  const int64_t Cl = local_heads_ * head_size_;  // this rank's share of the channels
  // q | k | v of the local heads side by side.
  const Tensor t = qkv->forward(norm1->forward(x, ac), ac);
  Tensor y = ac.cast(comm::packed_attention(t.reshape({B, N, 3 * Cl}), local_heads_, Causal::no, cp_, attention_));
  Tensor x1 = ac.cast(add(x, proj->forward(y.reshape({B * N, Cl}), ac)));
  return ac.cast(add(x1, fc2->forward(fc1->forward_gelu(norm2->forward(x1, ac), ac), ac)));
}

ViTTp::ViTTp(const ViTConfig& c, uint64_t seed, Device dev, comm::Communicator& tp, ViTTpOptions o)
    : TpModel(tp), cfg_(c), opt_(o), begin_(o.layer_begin), end_(o.layer_end < 0 ? c.depth : o.layer_end) {
  c.validate();
  ENGINE_CHECK(0 <= begin_ && begin_ < end_ && end_ <= c.depth, "vit pipeline stage: blocks [", begin_, ", ", end_,
               ") of depth ", c.depth);
  const int P = tp.size();
  ENGINE_CHECK(c.heads % P == 0, "vit --tp ", P, ": n_head ", c.heads, " does not divide by tp ", P);
  ENGINE_CHECK((c.mlp_ratio * c.embed) % P == 0, "vit --tp ", P, ": the MLP width ", c.mlp_ratio * c.embed,
               " does not divide by tp ", P);
  ENGINE_CHECK(!o.cp || c.tokens() % o.cp->size() == 0, "vit --cp ", o.cp ? o.cp->size() : 1, ": ", c.tokens(),
               " tokens do not divide by cp (change patch or cp)");
  // The serial model's modules and seeds, in its registration order.
  // A stage registers what it holds, in that order (and draws only those weights).
  ViTOuterLayers outer = vit_outer_layers(c, seed, dev);
  if (first_stage()) {
    patch_embed = register_module("patch_embed.proj", outer.patch_embed);
    pos_embed = register_module("pos_embed", outer.pos_embed);
  }
  for (int64_t l = begin_; l < end_; ++l)
    blocks.push_back(
        register_module("blocks." + std::to_string(l), std::make_shared<ViTTpBlock>(c, int(l), seed, dev, tp, o)));
  if (last_stage()) {
    norm = register_module("norm", outer.norm);
    head = register_module("head", outer.head);
  }
}

Shape ViTTp::stage_rows(int64_t B) const {
  const int64_t rows = B * cfg_.tokens() / cp();
  return {opt_.sequence_parallel ? rows / tp().size() : rows, cfg_.embed};
}

Tensor ViTTp::features(const Tensor& images, const Autocast& ac) const {
  ENGINE_CHECK(first_stage() && last_stage(), "vit: the whole model's forward on a pipeline stage (blocks ", begin_,
               "..", end_ - 1, "): use stage_forward");
  return stage_forward(Tensor(), images, ac);
}

Tensor ViTTp::stage_forward(const Tensor& in, const Tensor& images, const Autocast& ac) const {
  const int64_t C = cfg_.embed, B = images.size(0), N = cfg_.tokens() / cp();  // N: this rank's tokens
  ENGINE_CHECK(!opt_.sequence_parallel || (B * N) % tp().size() == 0, "vit --sequence_parallel: B N = ", B, " x ", N,
               " token rows do not divide by tp ", tp().size());
  Tensor x = in;
  if (first_stage()) {
    x = vit_embed(cfg_, *patch_embed, *pos_embed, positions_, images, ac, opt_.cp).reshape({B * N, C});
    if (opt_.sequence_parallel) x = comm::scatter_to_sp(x, tp());  // my rows; the gradient gathered back whole
  } else {
    ENGINE_CHECK(in.defined() && in.shape() == stage_rows(B), "vit pipeline stage (blocks ", begin_, "..", end_ - 1,
                 "): input ", in.desc(), ", expected rows ", shape_str(stage_rows(B)));
  }
  for (const auto& b : blocks) x = b->forward(x, B, N, ac);
  if (!last_stage()) return x;
  const profile::LayerRange r(vit_layers().head);
  Tensor h = norm->forward(x, ac);
  // The head is replicated over tp: every rank needs every row (and its gradient is already whole).
  if (opt_.sequence_parallel) h = comm::gather_from_sp_to_replicated(h, tp());
  return h.reshape({B, N, C});
}

Tensor ViTTp::forward(const Tensor& images, const Autocast& ac) const { return stage_output(features(images, ac), ac); }

Tensor ViTTp::stage_output(const Tensor& h, const Autocast& ac) const {
  if (cp() == 1) return vit_head(cfg_, *head, h, ac);
  const profile::LayerRange r(vit_layers().head);
  if (cfg_.head == ViTHead::classify)  // the mean over all tokens: my share, summed over cp
    return ac.cast(head->forward(comm::all_reduce_cp(scale(mean(h, 1), 1.0 / double(cp())), *opt_.cp), ac));
  const Tensor mine = head->forward(h, ac);  // (B, N / cp, p p C_out): my patches
  return unpatchify(comm::gather_seq_from_cp(mine, *opt_.cp), cfg_.patch, cfg_.out_channels, cfg_.img_h, cfg_.img_w);
}

Tensor ViTTp::loss(const Tensor& images, const Tensor& targets, const Autocast& ac) const {
  return stage_loss(features(images, ac), targets, ac);
}

Tensor ViTTp::stage_loss(const Tensor& h, const Tensor& targets, const Autocast& ac) const {
  if (cp() == 1 || cfg_.head == ViTHead::classify) return vit_loss(cfg_, ac.f32(stage_output(h, ac)), targets);
  // Dense under cp: my patches against the same patches of the targets.
  ENGINE_CHECK(targets.ndim() == 4 && targets.size(0) == h.size(0) && targets.size(1) == cfg_.out_channels &&
                   targets.size(2) == cfg_.img_h && targets.size(3) == cfg_.img_w,
               "vit: targets ", targets.desc(), " do not match the prediction (", h.size(0), ", ", cfg_.out_channels,
               ", ", cfg_.img_h, ", ", cfg_.img_w, ")");
  Tensor mine = ac.f32(head->forward(h, ac));
  const profile::LayerRange r(vit_layers().loss);
  return mse_loss(mine, comm::cp_slice(patchify_fields(targets, cfg_.patch), 1, *opt_.cp));
}

TpSplit ViTTp::split_of(const std::string& name) const {
  if (ends_with(name, "attn.qkv.weight") || ends_with(name, "attn.qkv.bias")) return TpSplit::qkv_rows;
  if (ends_with(name, "mlp.fc1.weight") || ends_with(name, "mlp.fc1.bias")) return TpSplit::rows;
  if (ends_with(name, "attn.proj.weight") || ends_with(name, "mlp.fc2.weight")) return TpSplit::cols;
  return TpSplit::whole;
}

std::vector<Tensor> ViTTp::partial_parameters() const {
  std::vector<Tensor> partial;
  if (!opt_.sequence_parallel || tp().size() == 1) return partial;
  for (const auto& b : blocks)
    for (const Tensor& p :
         {b->norm1->weight, b->norm1->bias, b->norm2->weight, b->norm2->bias, b->proj->bias, b->fc2->bias})
      partial.push_back(p);
  if (norm) {
    partial.push_back(norm->weight);
    partial.push_back(norm->bias);
  }
  return partial;
}

}  // namespace eng::models
