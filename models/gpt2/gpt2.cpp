// GPT-2 construction (initialisation as GPT-2/nanoGPT) and forward pass.
#include "models/gpt2/gpt2.h"

#include <cmath>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

void GPT2Config::validate() const {
  ENGINE_CHECK(vocab_size > 0, "gpt2 config: vocab_size must be > 0, got ", vocab_size);
  ENGINE_CHECK(block_size > 0, "gpt2 config: block_size must be > 0, got ", block_size);
  ENGINE_CHECK(n_layer > 0, "gpt2 config: n_layer must be > 0, got ", n_layer);
  ENGINE_CHECK(n_head > 0 && n_embd > 0 && n_embd % n_head == 0, "gpt2 config: n_embd (", n_embd,
               ") must be a positive multiple of n_head (", n_head, ")");
  ENGINE_CHECK(pad_vocab_to > 0, "gpt2 config: pad_vocab_to must be > 0, got ", pad_vocab_to);
}

double gpt2_flops_per_token(const GPT2Config& c, int64_t T) {
  // Non-embedding matmul parameters: 12 C^2 per layer, plus the tied lm_head V*C.
  const double C = double(c.n_embd), L = double(c.n_layer);
  const double n = 12.0 * L * C * C + double(c.vocab_size) * C;
  // 6 flops per parameter per token (2 forward, 4 backward), plus attention's
  // QK^T and PV: 2 * 2 * T * C per layer forward, x3 with backward (PaLM's formula).
  return 6.0 * n + 12.0 * L * C * double(T);
}

const GPT2Layers& gpt2_layers() {
  static const GPT2Layers layers;
  return layers;
}

GPT2Block::GPT2Block(const GPT2Config& c, int layer, uint64_t seed, Device dev)
    : n_head(c.n_head), n_embd(c.n_embd), range("h." + std::to_string(layer)) {
  const int64_t C = c.n_embd;
  const uint64_t s = seed * 7919ull + uint64_t(layer) * 101ull;
  InitOptions w{s, DType::f32, dev, 0.02f};
  // Residual projections are scaled by 1/sqrt(2 * n_layer) so the residual
  // stream's variance does not grow with depth (GPT-2 paper, section 2.3).
  InitOptions proj = w;
  proj.std = 0.02f / std::sqrt(2.0f * float(c.n_layer));
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(C, w));
  InitOptions a = w, ap = proj, f = w, mp = proj;
  a.seed = s + 1, ap.seed = s + 2, f.seed = s + 3, mp.seed = s + 4;
  c_attn = register_module("attn.c_attn", std::make_shared<Linear>(C, 3 * C, Bias::yes, a));
  attn_proj = register_module("attn.c_proj", std::make_shared<Linear>(C, C, Bias::yes, ap));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(C, w));
  c_fc = register_module("mlp.c_fc", std::make_shared<Linear>(C, 4 * C, Bias::yes, f));
  mlp_proj = register_module("mlp.c_proj", std::make_shared<Linear>(4 * C, C, Bias::yes, mp));
}

Tensor GPT2Block::forward(const Tensor& x, const Autocast& ac, AttentionImpl attention) const {
  const profile::LayerRange r(range);
  const int64_t B = x.size(0), T = x.size(1), C = n_embd, NH = n_head;
  // Attention: qkv projection, its three parts read as heads laid out (B, T, NH, HS).
  Tensor qkv = c_attn->forward(ln_1->forward(x, ac), ac);
  Tensor y = ac.cast(attention_qkv(qkv, NH, Causal::yes, attention));
  // Each output projection adds onto the residual stream in its GEMM.
  Tensor x1 = attn_proj->forward_residual(y.reshape({B, T, C}), x, ac);
  // MLP with 4C hidden units; c_fc's GELU runs in its GEMM's epilogue.
  return mlp_proj->forward_residual(c_fc->forward_gelu(ln_2->forward(x1, ac), ac), x1, ac);
}

GPT2::GPT2(const GPT2Config& c, uint64_t seed, Device dev) : cfg_(c), dev_(dev) {
  c.validate();
  wte = register_module(
      "wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd, InitOptions{seed * 31 + 1, DType::f32, dev, 0.02f}));
  wpe = register_module(
      "wpe", std::make_shared<Embedding>(c.block_size, c.n_embd, InitOptions{seed * 31 + 2, DType::f32, dev, 0.02f}));
  for (int l = 0; l < c.n_layer; ++l)
    h.push_back(register_module("h." + std::to_string(l), std::make_shared<GPT2Block>(c, l, seed, dev)));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(c.n_embd, InitOptions{0, DType::f32, dev, 0.f}));
}

int64_t GPT2::head_width(const Autocast& ac, Device dev) const {
  // Only where the head's weight is cast anyway (the padded copy costs
  // nothing more) and the GEMMs care: fp32 and the cpu keep vocab_size.
  const int64_t V = cfg_.vocab_size, m = cfg_.pad_vocab_to;
  return ac.active() && dev.type != DeviceType::cpu ? (V + m - 1) / m * m : V;
}

Tensor GPT2::forward(const Tensor& ids, Recompute recompute, const Autocast& ac,
                     std::optional<AttentionImpl> attention) const {
  Tensor logits = forward_padded(ids, recompute, ac, attention);
  return logits.size(1) == cfg_.vocab_size ? logits : narrow(logits, 1, 0, cfg_.vocab_size);
}

Tensor GPT2::forward_padded(const Tensor& ids, Recompute recompute, const Autocast& ac,
                            std::optional<AttentionImpl> attention) const {
  const AttentionImpl attn = attention.value_or(cfg_.attention);
  ENGINE_CHECK(ids.ndim() == 2 && ids.dtype() == DType::i32, "gpt2: token ids must be i32 (B, T), got ", ids.desc());
  const int64_t B = ids.size(0), T = ids.size(1);
  ENGINE_CHECK(T <= cfg_.block_size, "gpt2: sequence length ", T, " exceeds the model's block_size ", cfg_.block_size);
  // The token embeddings are gathered from the fp32 table and the position
  // embeddings added, the sum in the compute dtype (casting the (V, C) table
  // would copy all of it for B*T rows). On emu/cuda one kernel gathers, adds
  // and casts (embedding_positions; the cpu rounds in ac.cast after).
  Tensor x;
  {
    const profile::LayerRange r(gpt2_layers().embeddings);
    const DType sum_t = ac.active() && ids.device().type != DeviceType::cpu ? ac.policy().compute : DType::f32;
    x = ac.cast(embedding_positions(wte->weight, ids, wpe->weight, 0, sum_t));
  }
  for (const auto& block : h) {
    if (recompute == Recompute::yes) {
      // Saves only the block's input; its activations are recomputed in backward.
      // The checkpoint node belongs to the block's layer, so its backward
      // (the recompute and the block's backward) shows inside "h.N backward".
      const GPT2Block* b = block.get();
      const profile::LayerTag tag(b->range);
      x = checkpoint([b, ac, attn](const std::vector<Tensor>& in) { return b->forward(in[0], ac, attn); }, {x});
    } else {
      x = block->forward(x, ac, attn);
    }
  }
  const profile::LayerRange r(gpt2_layers().lm_head);
  Tensor hf = ln_f->forward(x, ac).reshape({B * T, cfg_.n_embd});
  // The lm_head is tied to wte: its compute-dtype copy, zero rows appended
  // to the head's width (the logits' padding columns are then 0).
  const int64_t W = head_width(ac, ids.device());
  const Tensor w = W == cfg_.vocab_size ? ac.cast(wte->weight) : ac.cast_rows(wte->weight, W);
  return ac.cast(matmul(hf, w, Trans::N, Trans::T));
}

Tensor GPT2::loss(const Tensor& ids, const Tensor& targets, Recompute recompute, const Autocast& ac) const {
  ENGINE_CHECK(targets.shape() == ids.shape(), "gpt2: targets ", targets.desc(), " do not match ids ", ids.desc());
  // On emu/cuda the cross-entropy reads bf16 logits as they are (fp32 math
  // inside, an fp32 loss): no widened copy of (B T, V) and no cast of its
  // gradient back. fp16 logits are widened: under loss scaling their
  // gradient, written before the scale reaches it, would underflow in fp16.
  // The cpu's 16-bit storage is emulated: it takes fp32.
  Tensor logits = forward_padded(ids, recompute, ac);
  if (logits.device().type == DeviceType::cpu || logits.dtype() == DType::f16) logits = ac.f32(logits);
  const profile::LayerRange r(gpt2_layers().loss);
  return cross_entropy_padded(logits, targets.reshape({ids.numel()}), cfg_.vocab_size);
}

bool gpt2_is_conv1d_weight(const std::string& name) {
  for (const char* suffix : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}) {
    const std::string s(suffix);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

}  // namespace eng::models
