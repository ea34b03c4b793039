// ViT weights <-> safetensors, with timm's parameter names
// ("blocks.0.attn.qkv.weight"). Saved as the engine holds them:
// patch_embed.proj.weight as (embed, C*p*p) and pos_embed.weight as
// (tokens, embed). Loading also takes timm's own forms of those two, the
// conv weight (embed, C, p, p) and the parameter `pos_embed` (1, tokens,
// embed): the same numbers in the same order. A timm state dict loads when
// its model matches ours: no class token, average pooling after the final
// norm (fc_norm = False), biases on qkv, the dense head being ours alone.
// Errors name the file and the tensor.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "models/vit/vit.h"

namespace eng::models {

void save_vit_weights(const std::string& path, const ViT& model);
void load_vit_weights(const std::string& path, ViT& model);
// The checkpoint's config.json: the shape in timm's argument names.
nlohmann::json vit_config_json(const ViTConfig& c);

}  // namespace eng::models
