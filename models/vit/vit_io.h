// ViT weights <-> safetensors in timm's names and shapes, so that timm's
// VisionTransformer, built from the checkpoint's config.json, loads the file
// strictly: "blocks.0.attn.qkv.weight", ..., the patch embedding as the
// convolution's (embed, C, p, p) and the positions as the parameter
// `pos_embed` (1, tokens, embed) (the engine holds those two as (embed,
// C*p*p) and (tokens, embed): the same numbers in the same order). Loading
// takes either form of those two. A timm state dict loads when its model
// matches ours: no class token, average pooling after the final norm
// (fc_norm = False), biases on qkv, the dense head being ours alone.
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
