// GPT-2 (Radford et al. 2019; Hugging Face's GPT2LMHeadModel): learned token
// and position embeddings, pre-LN blocks of causal multi-head attention and a
// GELU(tanh) MLP with 4C hidden units, a final layernorm, and an lm_head tied
// to the token embedding.
// Parameter names are Hugging Face's ("h.0.attn.c_attn.weight", ...), so a
// checkpoint loads into GPT2LMHeadModel. Internally every matrix is stored
// (out, in) like torch.nn.Linear; Hugging Face's Conv1D stores (in, out), and
// the checkpoint code transposes at the file boundary (see gpt2_io.h).
// An Autocast (engine/precision.h) sets the precision level: the parameters
// stay fp32 masters; weights, GEMM inputs/outputs and the residual stream go
// to the compute dtype (bf16 for O2), the logits back to fp32 for the loss.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

struct GPT2Config {
  int64_t vocab_size = 256;
  int64_t block_size = 128;  // maximum sequence length (n_positions)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  AttentionImpl attention = AttentionImpl::ours;  // ours or cuDNN's fused attention (--attention)
  // On emu/cuda under O2/O3 the lm_head's GEMMs run over the vocabulary
  // padded to a multiple of this (llm.c's Vp: 50257 -> 50304), so their rows
  // are 16-byte aligned; the padding is zero rows of the head's bf16 weight
  // copy, never a parameter (checkpoints and exports keep vocab_size rows).
  // 1: no padding.
  int64_t pad_vocab_to = 64;
  void validate() const;  // errors name the offending field
};

// Multiply-adds per token for a forward pass, llm.c's accounting: 6*N per
// token for forward+backward of the matmuls plus the attention scores.
double gpt2_flops_per_token(const GPT2Config& c, int64_t T);

// The profiler's layers outside the blocks (engine/profile.h), one set for
// GPT2 and GPT2Tp so both name them alike.
struct GPT2Layers {
  profile::Layer embeddings{"embeddings"}, lm_head{"lm_head"}, loss{"loss"};
};
const GPT2Layers& gpt2_layers();

class GPT2Block : public Module {
 public:
  GPT2Block(const GPT2Config& c, int layer, uint64_t seed, Device dev);
  // (B, T, C) -> (B, T, C); attention: whose kernel (ours or cuDNN's).
  Tensor forward(const Tensor& x, const Autocast& ac = Autocast(), AttentionImpl attention = AttentionImpl::ours) const;
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<Linear> c_attn, attn_proj, c_fc, mlp_proj;
  int64_t n_head, n_embd;
  profile::Layer range;  // "h.3": its profiler range (engine/profile.h)
};

enum class Recompute : uint8_t { no, yes };  // activation checkpointing per block

class GPT2 : public Module {
 public:
  GPT2(const GPT2Config& c, uint64_t seed, Device dev = kCPU);
  // ids (B, T) i32 -> logits (B*T, V). attention: the config's, unless
  // given (text sampling runs ours: it goes one length T at a time in fp32,
  // where cuDNN's fused attention takes bf16/f16 and builds a plan per T).
  Tensor forward(const Tensor& ids, Recompute recompute = Recompute::no, const Autocast& ac = Autocast(),
                 std::optional<AttentionImpl> attention = std::nullopt) const;
  // forward's logits as the head computes them: (B*T, head_width(ac, dev)),
  // the vocabulary's columns first, then the padding's (GPT2Config::pad_vocab_to).
  Tensor forward_padded(const Tensor& ids, Recompute recompute = Recompute::no, const Autocast& ac = Autocast(),
                        std::optional<AttentionImpl> attention = std::nullopt) const;
  int64_t head_width(const Autocast& ac, Device dev) const;
  // Mean cross-entropy of forward(ids) against targets (B, T) i32, computed in fp32.
  Tensor loss(const Tensor& ids, const Tensor& targets, Recompute recompute = Recompute::no,
              const Autocast& ac = Autocast()) const;
  const GPT2Config& config() const { return cfg_; }
  Device device() const { return dev_; }

  std::shared_ptr<Embedding> wte, wpe;
  std::vector<std::shared_ptr<GPT2Block>> h;
  std::shared_ptr<LayerNorm> ln_f;

 private:
  GPT2Config cfg_;
  Device dev_;
};

// Names of the parameters Hugging Face stores transposed (Conv1D weights).
bool gpt2_is_conv1d_weight(const std::string& name);

}  // namespace eng::models
