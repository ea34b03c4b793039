// ViT safetensors export/import (see vit_io.h).
#include "models/vit/vit_io.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "io/safetensors.h"

namespace eng::models {

void save_vit_weights(const std::string& path, const ViT& model) {
  // timm's names and shapes, so timm's VisionTransformer loads the file
  // strictly: the patch embedding as its convolution's (E, C, p, p) (the
  // same numbers as the engine's GEMM weight (E, C p p), row-major), the
  // positions as the parameter `pos_embed` (1, N, E).
  const ViTConfig& c = model.config();
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : model.named_parameters()) {
    Tensor t = p.detach().to(kCPU);
    if (name == "patch_embed.proj.weight")
      out.emplace_back(name, t.reshape({c.embed, c.in_channels, c.patch, c.patch}));
    else if (name == "pos_embed.weight")
      out.emplace_back("pos_embed", t.reshape({1, t.size(0), t.size(1)}));
    else
      out.emplace_back(name, t);
  }
  save_safetensors(path, out, {{"format", "pt"}, {"model", "vit"}, {"config", vit_config_json(model.config()).dump()}});
}

void load_vit_weights(const std::string& path, ViT& model) {
  NoGradGuard ng;
  const SafetensorsFile f = load_safetensors(path);
  for (auto& [name, p] : model.named_parameters()) {
    // timm's position table is the parameter `pos_embed` (1, N, E); ours is
    // an Embedding's weight (N, E). Same numbers, same order. Files of
    // either layout load.
    const std::string key = name == "pos_embed.weight" && !f.has(name) && f.has("pos_embed") ? "pos_embed" : name;
    ENGINE_USER_CHECK(f.has(key), path, ": missing tensor '", name, "'",
                      name == "pos_embed.weight" ? " (nor timm's 'pos_embed')" : "");
    Tensor t = f.get(key);
    ENGINE_USER_CHECK(is_floating(t.dtype()), path, ": tensor '", key, "' has dtype ", dtype_name(t.dtype()));
    // timm's conv weight (E, C, p, p) is the engine's (E, C*p*p) row-major.
    const bool timm_shape = (name == "patch_embed.proj.weight" && t.ndim() == 4) ||
                            (name == "pos_embed.weight" && t.ndim() == 3 && t.size(0) == 1);
    if (timm_shape && t.numel() == p.numel()) t = t.reshape(p.shape());
    ENGINE_USER_CHECK(t.shape() == p.shape(), path, ": tensor '", key, "' has shape ", shape_str(t.shape()),
                      ", the model needs ", shape_str(p.shape()));
    Tensor dst = p;
    dst.copy_from(t.to(DType::f32).to(p.device()));
  }
}

nlohmann::json vit_config_json(const ViTConfig& c) {
  nlohmann::json j{{"architecture", "vit"},    {"img_size", {c.img_h, c.img_w}},
                   {"patch_size", c.patch},    {"in_chans", c.in_channels},
                   {"embed_dim", c.embed},     {"depth", c.depth},
                   {"num_heads", c.heads},     {"mlp_ratio", c.mlp_ratio},
                   {"act_layer", "gelu_tanh"}, {"head", c.head == ViTHead::classify ? "classify" : "dense"}};
  if (c.head == ViTHead::classify)
    // The final norm before the token mean (timm's fc_norm = False).
    j["num_classes"] = c.classes, j["global_pool"] = "avg", j["class_token"] = false, j["fc_norm"] = false;
  else
    j["out_chans"] = c.out_channels;
  return j;
}

}  // namespace eng::models
