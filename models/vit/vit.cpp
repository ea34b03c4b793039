// ViT construction (timm's initialisation scale) and forward pass.
#include "models/vit/vit.h"

#include "base/error.h"
#include "comm/cp_mappings.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

void ViTConfig::validate() const {
  ENGINE_CHECK(in_channels > 0 && img_h > 0 && img_w > 0, "vit config: image (", in_channels, ", ", img_h, ", ", img_w,
               ") must be positive");
  ENGINE_CHECK(patch > 0 && img_h % patch == 0 && img_w % patch == 0, "vit config: patch ", patch,
               " must divide the image ", img_h, " x ", img_w);
  ENGINE_CHECK(depth > 0 && mlp_ratio > 0, "vit config: depth and mlp_ratio must be > 0");
  ENGINE_CHECK(heads > 0 && embed > 0 && embed % heads == 0, "vit config: embed (", embed,
               ") must be a positive multiple of heads (", heads, ")");
  ENGINE_CHECK(head != ViTHead::classify || classes > 1, "vit config: classes must be > 1, got ", classes);
  ENGINE_CHECK(head != ViTHead::dense || out_channels > 0, "vit config: out_channels must be > 0, got ", out_channels);
}

ViTBlock::ViTBlock(const ViTConfig& c, int layer, uint64_t seed, Device dev)
    : heads(c.heads), embed(c.embed), attention(c.attention), range("blocks." + std::to_string(layer)) {
  const int64_t C = c.embed;
  const uint64_t s = seed * 7919ull + uint64_t(layer) * 101ull;
  auto w = [&](uint64_t k) { return InitOptions{s + k, DType::f32, dev, 0.02f}; };
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(C, w(0), 1e-6));
  qkv = register_module("attn.qkv", std::make_shared<Linear>(C, 3 * C, Bias::yes, w(1)));
  proj = register_module("attn.proj", std::make_shared<Linear>(C, C, Bias::yes, w(2)));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(C, w(0), 1e-6));
  fc1 = register_module("mlp.fc1", std::make_shared<Linear>(C, c.mlp_ratio * C, Bias::yes, w(3)));
  fc2 = register_module("mlp.fc2", std::make_shared<Linear>(c.mlp_ratio * C, C, Bias::yes, w(4)));
}

Tensor ViTBlock::forward(const Tensor& x, const Autocast& ac) const {
  const profile::LayerRange r(range);
  const int64_t B = x.size(0), N = x.size(1), C = embed;
  // q, k, v side by side in the projection's output, read in place (attention_qkv).
  Tensor y = ac.cast(attention_qkv(qkv->forward(norm1->forward(x, ac), ac), heads, Causal::no, attention));
  Tensor x1 = proj->forward_residual(y.reshape({B, N, C}), x, ac);  // adds onto the residual in its GEMM
  return fc2->forward_residual(fc1->forward_gelu(norm2->forward(x1, ac), ac), x1, ac);
}

ViTOuterLayers vit_outer_layers(const ViTConfig& c, uint64_t seed, Device dev) {
  const int64_t pp = c.patch * c.patch;
  const int64_t out = c.head == ViTHead::classify ? c.classes : pp * c.out_channels;
  return {std::make_shared<Linear>(c.in_channels * pp, c.embed, Bias::yes, InitOptions{seed * 31 + 1, DType::f32, dev}),
          std::make_shared<Embedding>(c.tokens(), c.embed, InitOptions{seed * 31 + 2, DType::f32, dev, 0.02f}),
          std::make_shared<LayerNorm>(c.embed, InitOptions{0, DType::f32, dev}, 1e-6),
          std::make_shared<Linear>(c.embed, out, Bias::yes, InitOptions{seed * 31 + 3, DType::f32, dev, 0.02f})};
}

ViT::ViT(const ViTConfig& c, uint64_t seed, Device dev) : cfg_(c) {
  c.validate();
  ViTOuterLayers o = vit_outer_layers(c, seed, dev);
  patch_embed = register_module("patch_embed.proj", o.patch_embed);
  pos_embed = register_module("pos_embed", o.pos_embed);
  for (int l = 0; l < c.depth; ++l)
    blocks.push_back(register_module("blocks." + std::to_string(l), std::make_shared<ViTBlock>(c, l, seed, dev)));
  norm = register_module("norm", o.norm);
  head = register_module("head", o.head);
}

Tensor patchify(const Tensor& x, int64_t p) {
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor t = permute(x.reshape({B, C, H / p, p, W / p, p}), {0, 2, 4, 1, 3, 5});  // (B, h, w, C, p, p)
  return t.reshape({B, (H / p) * (W / p), C * p * p});
}

Tensor patchify_fields(const Tensor& x, int64_t p) {
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor t = permute(x.reshape({B, C, H / p, p, W / p, p}), {0, 2, 4, 3, 5, 1});  // (B, h, w, p, p, C)
  return t.reshape({B, (H / p) * (W / p), p * p * C});
}

Tensor unpatchify(const Tensor& t, int64_t p, int64_t C, int64_t H, int64_t W) {
  const int64_t B = t.size(0);
  Tensor x = permute(t.reshape({B, H / p, W / p, p, p, C}), {0, 5, 1, 3, 2, 4});  // (B, C, h, p, w, p)
  return x.reshape({B, C, H, W});
}

const ViTLayers& vit_layers() {
  static const ViTLayers layers;
  return layers;
}

Tensor vit_embed(const ViTConfig& c, const Linear& patch_embed, const Embedding& pos_embed,
                 const PositionIds& positions, const Tensor& images, const Autocast& ac, const comm::Communicator* cp) {
  ENGINE_CHECK(
      images.ndim() == 4 && images.size(1) == c.in_channels && images.size(2) == c.img_h && images.size(3) == c.img_w,
      "vit: images must be (B, ", c.in_channels, ", ", c.img_h, ", ", c.img_w, "), got ", images.desc());
  const profile::LayerRange r(vit_layers().patch_embed);
  Tensor patches = patchify(ac.cast(images), c.patch);
  int64_t first = 0;
  if (cp && cp->size() > 1) {
    patches = comm::cp_slice(patches, 1, *cp);  // the images need no gradient
    first = cp->rank() * patches.size(1);
  }
  return ac.cast(add(ac.f32(patch_embed.forward(patches, ac)),
                     pos_embed.forward(positions.get(images.size(0), patches.size(1), images.device(), first))));
}

Tensor vit_head(const ViTConfig& c, const Linear& head, const Tensor& h, const Autocast& ac) {
  if (c.head == ViTHead::classify) return ac.cast(head.forward(mean(h, 1), ac));
  return unpatchify(head.forward(h, ac), c.patch, c.out_channels, c.img_h, c.img_w);
}

Tensor vit_loss(const ViTConfig& c, const Tensor& out, const Tensor& targets) {
  const profile::LayerRange r(vit_layers().loss);
  const int64_t B = out.size(0);
  if (c.head == ViTHead::classify) {
    ENGINE_CHECK(targets.dtype() == DType::i32 && targets.ndim() == 1 && targets.size(0) == B,
                 "vit: labels must be i32 (", B, "), got ", targets.desc());
    return cross_entropy(out, targets);
  }
  ENGINE_CHECK(targets.shape() == out.shape(), "vit: targets ", targets.desc(), " do not match the prediction ",
               out.desc());
  return mse_loss(out, targets);
}

Tensor ViT::forward(const Tensor& images, const Autocast& ac) const {
  Tensor x = vit_embed(cfg_, *patch_embed, *pos_embed, positions_, images, ac);
  for (const auto& b : blocks) x = b->forward(x, ac);
  const profile::LayerRange r(vit_layers().head);
  return vit_head(cfg_, *head, norm->forward(x, ac), ac);
}

Tensor ViT::loss(const Tensor& images, const Tensor& targets, const Autocast& ac) const {
  return vit_loss(cfg_, ac.f32(forward(images, ac)), targets);
}

double vit_flops_per_image(const ViTConfig& c) {
  const double N = double(c.tokens()), E = double(c.embed), pp = double(c.patch * c.patch);
  const double block = N * E * 3 * E                           // qkv
                       + 2 * N * N * E                         // scores q k^T and their weighted sum of v
                       + N * E * E                             // attention projection
                       + 2 * N * E * double(c.mlp_ratio) * E;  // fc1, fc2
  const double head = c.head == ViTHead::classify ? E * double(c.classes) : N * E * pp * double(c.out_channels);
  const double forward_macs = N * double(c.in_channels) * pp * E + double(c.depth) * block + head;
  return 3 * 2 * forward_macs;
}

}  // namespace eng::models
