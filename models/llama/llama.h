// Llama (Touvron et al. 2023; Hugging Face's LlamaForCausalLM): token
// embeddings, pre-norm blocks of RMSNorm, causal attention with rotary
// positions and grouped K/V heads, and a SwiGLU MLP, a final RMSNorm and an
// lm_head (its own matrix, or tied to the embedding). No biases.
// Two projections are packed where Hugging Face keeps them apart, so each
// is one GEMM: self_attn.qkv_proj = [q_proj; k_proj; v_proj] (rows (NH + 2
// NKV) HS) and mlp.gate_up_proj = [gate_proj; up_proj] (rows 2 F); the
// file code (llama_io.h) splits and joins them at the boundary. Every other
// parameter has Hugging Face's name ("model.layers.3.self_attn.o_proj.weight").
// Rotary positions are Hugging Face's rotate_half layout (q and k rows as
// transformers holds them: no permutation at the boundary).
// An Autocast (engine/precision.h) sets the precision as for GPT-2.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/profile.h"
#include "models/gpt2/gpt2.h"  // Recompute

namespace eng::models {

struct LlamaConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 128;  // max_position_embeddings: the rotary table's rows
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_kv_head = 2;  // num_key_value_heads, dividing n_head
  int64_t n_embd = 128;
  int64_t ffn_hidden = 0;  // intermediate_size; 0: 8 n_embd / 3 rounded up to a multiple of 64
  double rms_eps = 1e-5;   // rms_norm_eps
  RopeOptions rope;        // rope_theta, rope_scaling (llama3)
  bool tie_embeddings = false;
  AttentionImpl attention = AttentionImpl::ours;
  // As GPT-2's (gpt2.h): on emu/cuda under O2/O3 the head's GEMMs run over
  // the vocabulary padded to a multiple of this, zero rows of the head's
  // 16-bit copy (never a parameter; files keep vocab_size rows). 1: none.
  int64_t pad_vocab_to = 64;
  int64_t head_size() const { return n_embd / n_head; }
  int64_t hidden() const { return ffn_hidden > 0 ? ffn_hidden : (8 * n_embd / 3 + 63) / 64 * 64; }
  void validate() const;  // errors name the offending field
};

// 6 flops per matmul parameter per token (embedding table aside; the head
// counted) plus attention's 12 L C T (as gpt2_flops_per_token).
double llama_flops_per_token(const LlamaConfig& c, int64_t T);

class LlamaBlock : public Module {
 public:
  LlamaBlock(const LlamaConfig& c, int layer, uint64_t seed, Device dev);
  // (B, T, C) -> (B, T, C); table: the rotary cos/sin (rope_table).
  Tensor forward(const Tensor& x, const Tensor& table, const Autocast& ac, AttentionImpl attention) const;
  std::shared_ptr<RMSNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<Linear> qkv_proj, o_proj, gate_up_proj, down_proj;
  int64_t n_head, n_kv_head;
  profile::Layer range;  // "layers.3"
};

class Llama : public Module {
 public:
  Llama(const LlamaConfig& c, uint64_t seed, Device dev = kCPU);
  // ids (B, T) i32 -> logits (B*T, V).
  Tensor forward(const Tensor& ids, Recompute recompute = Recompute::no, const Autocast& ac = Autocast(),
                 std::optional<AttentionImpl> attention = std::nullopt) const;
  // The logits as the head computes them: (B*T, head_width(ac, dev)), the
  // vocabulary's columns first, then the padding's (pad_vocab_to).
  Tensor forward_padded(const Tensor& ids, Recompute recompute = Recompute::no, const Autocast& ac = Autocast(),
                        std::optional<AttentionImpl> attention = std::nullopt) const;
  int64_t head_width(const Autocast& ac, Device dev) const;
  // Mean cross-entropy of forward(ids) against targets (B, T) i32, in fp32.
  Tensor loss(const Tensor& ids, const Tensor& targets, Recompute recompute = Recompute::no,
              const Autocast& ac = Autocast()) const;
  const LlamaConfig& config() const { return cfg_; }
  Device device() const { return dev_; }
  // The lm_head's weight: lm_head's own, or the embedding's when tied.
  const Tensor& head_weight() const { return lm_head ? lm_head->weight : embed_tokens->weight; }

  std::shared_ptr<Embedding> embed_tokens;
  std::vector<std::shared_ptr<LlamaBlock>> layers;
  std::shared_ptr<RMSNorm> norm;
  std::shared_ptr<Linear> lm_head;  // null when tied
  Tensor rope;                      // (block_size, head size) fp32 on the device: not a parameter

 private:
  LlamaConfig cfg_;
  Device dev_;
};

}  // namespace eng::models
