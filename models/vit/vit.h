// The Vision Transformer (Dosovitskiy et al. 2021), as the NERSC "Deep
// Learning at Scale" tutorial uses it for weather forecasting and as timm
// builds it for classification: the image is cut into patch x patch squares,
// each flattened in (channel, row, column) order and projected to `embed`
// (a Conv2d of stride patch, written as the GEMM it is); a learned position
// embedding is added; `depth` pre-LN blocks of non-causal multi-head
// attention and a GELU MLP of ratio 4; a final layernorm; then one of two heads:
//   classify: the tokens' mean (no class token), Linear -> (B, classes)
//   dense:    Linear per token -> patch x patch x out_channels, reassembled
//             into the image (B, out_channels, H, W) (the tutorial's head)
// Parameter names follow timm's VisionTransformer ("blocks.0.attn.qkv.weight",
// "patch_embed.proj.weight" as (embed, C*p*p), "pos_embed.weight" as (tokens,
// embed)).
// GELU is the tanh approximation (the engine's gelu, as GPT-2's); the
// tutorial's nn.GELU is the erf form, within 1e-3 of it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/profile.h"
#include "models/position_ids.h"

namespace eng::models {

enum class ViTHead : uint8_t { classify, dense };

struct ViTConfig {
  int64_t in_channels = 1, img_h = 28, img_w = 28, patch = 4;
  int64_t embed = 64, depth = 4, heads = 4, mlp_ratio = 4;
  ViTHead head = ViTHead::classify;
  int64_t classes = 10;                           // classify
  int64_t out_channels = 1;                       // dense
  AttentionImpl attention = AttentionImpl::ours;  // ours or cuDNN's fused attention (--attention)
  void validate() const;                          // errors name the offending field
  int64_t tokens() const { return (img_h / patch) * (img_w / patch); }
};

// The profiler ranges (engine/profile.h) of the layers outside the blocks,
// one set for the serial and the tensor-parallel ViT.
struct ViTLayers {
  profile::Layer patch_embed{"patch_embed"}, head{"head"}, loss{"loss"};
};
const ViTLayers& vit_layers();

class ViTBlock : public Module {
 public:
  ViTBlock(const ViTConfig& c, int layer, uint64_t seed, Device dev);
  Tensor forward(const Tensor& x, const Autocast& ac = Autocast()) const;  // (B, N, C) -> (B, N, C)
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Linear> qkv, proj, fc1, fc2;
  int64_t heads, embed;
  AttentionImpl attention;
  profile::Layer range;  // "blocks.3": its profiler range (engine/profile.h)
};

class ViT : public Module {
 public:
  ViT(const ViTConfig& c, uint64_t seed, Device dev = kCPU);
  // images (B, C, H, W) f32 -> logits (B, classes) or fields (B, out_channels, H, W)
  Tensor forward(const Tensor& images, const Autocast& ac = Autocast()) const;
  // classify: mean cross-entropy against labels (B) i32; dense: MSE against
  // targets (B, out_channels, H, W). In fp32.
  Tensor loss(const Tensor& images, const Tensor& targets, const Autocast& ac = Autocast()) const;
  const ViTConfig& config() const { return cfg_; }

  std::shared_ptr<Linear> patch_embed;
  std::shared_ptr<Embedding> pos_embed;  // (tokens, embed), gathered with ids 0..N-1
  std::vector<std::shared_ptr<ViTBlock>> blocks;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;

 private:
  ViTConfig cfg_;
  PositionIds positions_;
};

// The parts the serial and the tensor-parallel ViT share:
// the layers outside the blocks, drawn from the model's seeds;
struct ViTOuterLayers {
  std::shared_ptr<Linear> patch_embed;
  std::shared_ptr<Embedding> pos_embed;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;
};
ViTOuterLayers vit_outer_layers(const ViTConfig& c, uint64_t seed, Device dev);
// images (B, C, H, W) -> tokens (B, N, embed): the patch embedding plus the
// positions, summed in fp32 (as torch's type promotion makes it), then cast.
// With a cp group of more than one rank, this rank's slice of the tokens
// (B, N / cp, embed), at their positions.
Tensor vit_embed(const ViTConfig& c, const Linear& patch_embed, const Embedding& pos_embed,
                 const PositionIds& positions, const Tensor& images, const Autocast& ac,
                 const comm::Communicator* cp = nullptr);
// The normed tokens (B, N, embed) -> logits (B, classes) or fields (B, out_channels, H, W).
Tensor vit_head(const ViTConfig& c, const Linear& head, const Tensor& h, const Autocast& ac);
// The fp32 output against labels (classify) or target fields (dense).
Tensor vit_loss(const ViTConfig& c, const Tensor& out, const Tensor& targets);

// FLOPs of one image's forward and backward (3x the forward's): every GEMM
// (patch embedding, qkv, attention scores and values, projection, MLP,
// head) at 2 per multiply-add; layernorms, GELU and softmax not counted, as
// llm.c and the MFU literature count.
double vit_flops_per_image(const ViTConfig& c);

// (B, C, H, W) -> (B, N, C*p*p), patches in row-major order, each flattened
// (channel, row, column): the layout a Conv2d(kernel = stride = p) reads.
Tensor patchify(const Tensor& images, int64_t p);
// (B, N, p*p*C) with each token's values in (row, column, channel) order, the
// tutorial's head layout -> (B, C, H, W).
Tensor unpatchify(const Tensor& tokens, int64_t p, int64_t C, int64_t H, int64_t W);
// Its inverse: fields (B, C, H, W) -> (B, N, p*p*C) in the head's layout.
Tensor patchify_fields(const Tensor& fields, int64_t p);

}  // namespace eng::models
