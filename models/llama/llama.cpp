// Llama construction (Hugging Face's initialisation: N(0, 0.02) matrices,
// norms at one) and forward pass.
#include "models/llama/llama.h"

#include "base/error.h"
#include "engine/autograd.h"

namespace eng::models {

void LlamaConfig::validate() const {
  ENGINE_CHECK(vocab_size > 0, "llama config: vocab_size must be > 0, got ", vocab_size);
  ENGINE_CHECK(block_size > 0, "llama config: block_size must be > 0, got ", block_size);
  ENGINE_CHECK(n_layer > 0, "llama config: n_layer must be > 0, got ", n_layer);
  ENGINE_CHECK(n_head > 0 && n_embd > 0 && n_embd % n_head == 0, "llama config: n_embd (", n_embd,
               ") must be a positive multiple of n_head (", n_head, ")");
  ENGINE_CHECK(head_size() % 2 == 0, "llama config: the head size n_embd / n_head = ", head_size(),
               " must be even (rotary pairs)");
  ENGINE_CHECK(n_kv_head > 0 && n_head % n_kv_head == 0, "llama config: n_kv_head (", n_kv_head,
               ") must divide n_head (", n_head, ")");
  ENGINE_CHECK(ffn_hidden >= 0, "llama config: ffn_hidden must be >= 0 (0: 8 n_embd / 3), got ", ffn_hidden);
  ENGINE_CHECK(rms_eps > 0, "llama config: rms_eps must be > 0, got ", rms_eps);
  ENGINE_CHECK(pad_vocab_to > 0, "llama config: pad_vocab_to must be > 0, got ", pad_vocab_to);
  rope.validate();
}

double llama_flops_per_token(const LlamaConfig& c, int64_t T) {
  const double C = double(c.n_embd), L = double(c.n_layer), HS = double(c.head_size());
  const double attn = C * HS * double(c.n_head + 2 * c.n_kv_head) + C * C;  // qkv_proj, o_proj
  const double mlp = 3.0 * C * double(c.hidden());                          // gate, up, down
  const double n = L * (attn + mlp) + double(c.vocab_size) * C;             // + the head
  return 6.0 * n + 12.0 * L * C * double(T);
}

LlamaBlock::LlamaBlock(const LlamaConfig& c, int layer, uint64_t seed, Device dev)
    : n_head(c.n_head), n_kv_head(c.n_kv_head), range("layers." + std::to_string(layer)) {
  const int64_t C = c.n_embd, HS = c.head_size(), F = c.hidden();
  const uint64_t s = seed * 7919ull + uint64_t(layer) * 101ull;
  InitOptions w{s, DType::f32, dev, 0.02f};
  auto seeded = [&](uint64_t k) {
    InitOptions o = w;
    o.seed = s + k;
    return o;
  };
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(C, w, c.rms_eps));
  qkv_proj = register_module("self_attn.qkv_proj",
                             std::make_shared<Linear>(C, (c.n_head + 2 * c.n_kv_head) * HS, Bias::no, seeded(1)));
  o_proj = register_module("self_attn.o_proj", std::make_shared<Linear>(C, C, Bias::no, seeded(2)));
  post_attention_layernorm = register_module("post_attention_layernorm", std::make_shared<RMSNorm>(C, w, c.rms_eps));
  gate_up_proj = register_module("mlp.gate_up_proj", std::make_shared<Linear>(C, 2 * F, Bias::no, seeded(3)));
  down_proj = register_module("mlp.down_proj", std::make_shared<Linear>(F, C, Bias::no, seeded(4)));
}

Tensor LlamaBlock::forward(const Tensor& x, const Tensor& table, const Autocast& ac, AttentionImpl attention) const {
  const profile::LayerRange r(range);
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  // q | k | v in one GEMM; q's and k's heads turned in place (the GEMM's
  // output is saved by no one); grouped K/V heads read in place.
  // ac.cast: the cpu's autocast rounds the turned values as emu/cuda store them.
  Tensor qkv = ac.cast(rope_(qkv_proj->forward(input_layernorm->forward(x, ac), ac), table, n_head + n_kv_head));
  Tensor y = ac.cast(attention_qkv(qkv, n_head, Causal::yes, attention, n_kv_head));
  // Each projection adds onto the residual stream in its GEMM's epilogue
  // (forward_residual: Epilogue::residual on emu/cuda, no add pass).
  Tensor x1 = o_proj->forward_residual(y.reshape({B, T, C}), x, ac);
  Tensor h = ac.cast(swiglu(gate_up_proj->forward(post_attention_layernorm->forward(x1, ac), ac)));
  return down_proj->forward_residual(h, x1, ac);
}

Llama::Llama(const LlamaConfig& c, uint64_t seed, Device dev) : cfg_(c), dev_(dev) {
  c.validate();
  embed_tokens = register_module(
      "model.embed_tokens",
      std::make_shared<Embedding>(c.vocab_size, c.n_embd, InitOptions{seed * 31 + 1, DType::f32, dev, 0.02f}));
  for (int l = 0; l < c.n_layer; ++l)
    layers.push_back(
        register_module("model.layers." + std::to_string(l), std::make_shared<LlamaBlock>(c, l, seed, dev)));
  norm = register_module("model.norm",
                         std::make_shared<RMSNorm>(c.n_embd, InitOptions{0, DType::f32, dev, 0.f}, c.rms_eps));
  if (!c.tie_embeddings)
    lm_head = register_module("lm_head", std::make_shared<Linear>(c.n_embd, c.vocab_size, Bias::no,
                                                                  InitOptions{seed * 31 + 2, DType::f32, dev, 0.02f}));
  rope = rope_table(c.block_size, c.head_size(), c.rope, dev);
}

int64_t Llama::head_width(const Autocast& ac, Device dev) const {
  // Where the head's weight is cast anyway (the padded copy costs nothing
  // more) and the GEMMs care: fp32 and the cpu keep vocab_size.
  const int64_t V = cfg_.vocab_size, m = cfg_.pad_vocab_to;
  return ac.active() && dev.type != DeviceType::cpu ? (V + m - 1) / m * m : V;
}

Tensor Llama::forward(const Tensor& ids, Recompute recompute, const Autocast& ac,
                      std::optional<AttentionImpl> attention) const {
  Tensor logits = forward_padded(ids, recompute, ac, attention);
  return logits.size(1) == cfg_.vocab_size ? logits : narrow(logits, 1, 0, cfg_.vocab_size);
}

Tensor Llama::forward_padded(const Tensor& ids, Recompute recompute, const Autocast& ac,
                             std::optional<AttentionImpl> attention) const {
  const AttentionImpl attn = attention.value_or(cfg_.attention);
  ENGINE_CHECK(ids.ndim() == 2 && ids.dtype() == DType::i32, "llama: token ids must be i32 (B, T), got ", ids.desc());
  const int64_t B = ids.size(0), T = ids.size(1);
  ENGINE_CHECK(T <= cfg_.block_size, "llama: sequence length ", T, " exceeds the model's block_size ", cfg_.block_size);
  Tensor x = ac.cast(embed_tokens->forward(ids));
  for (const auto& block : layers) {
    if (recompute == Recompute::yes) {
      const LlamaBlock* b = block.get();
      const Tensor table = rope;
      const profile::LayerTag tag(b->range);
      x = checkpoint([b, table, ac, attn](const std::vector<Tensor>& in) { return b->forward(in[0], table, ac, attn); },
                     {x});
    } else {
      x = block->forward(x, rope, ac, attn);
    }
  }
  const Tensor h = norm->forward(x, ac).reshape({B * T, cfg_.n_embd});
  const int64_t W = head_width(ac, ids.device());
  const Tensor w = W == cfg_.vocab_size ? ac.cast(head_weight()) : ac.cast_rows(head_weight(), W);
  return ac.cast(matmul(h, w, Trans::N, Trans::T));
}

Tensor Llama::loss(const Tensor& ids, const Tensor& targets, Recompute recompute, const Autocast& ac) const {
  ENGINE_CHECK(targets.shape() == ids.shape(), "llama: targets ", targets.desc(), " do not match ids ", ids.desc());
  // As GPT2::loss: bf16 logits read as they are on emu/cuda; the cpu's
  // emulated 16-bit storage and fp16 widened.
  Tensor logits = forward_padded(ids, recompute, ac);
  if (logits.device().type == DeviceType::cpu || logits.dtype() == DType::f16) logits = ac.f32(logits);
  return cross_entropy_padded(logits, targets.reshape({ids.numel()}), cfg_.vocab_size);
}

}  // namespace eng::models
