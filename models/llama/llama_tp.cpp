// A Llama under tensor, sequence, context and pipeline parallelism
// (llama_tp.h): construction with the serial model's seeds, the forward on
// local heads and MLP slices, the name -> shard rules.
#include "models/llama/llama_tp.h"

#include "base/error.h"
#include "comm/cp_mappings.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

namespace {
bool is_vocab(const std::string& name) { return name == "model.embed_tokens.weight" || name == "lm_head.weight"; }
}  // namespace

std::vector<int64_t> LlamaTp::row_blocks(const std::string& name) const {
  const int64_t HS = cfg_.head_size();
  if (ends_with(name, "qkv_proj.weight")) return {cfg_.n_head * HS, cfg_.n_kv_head * HS, cfg_.n_kv_head * HS};
  return {cfg_.hidden(), cfg_.hidden()};  // gate_up_proj
}

TpSplit LlamaTp::split_of(const std::string& name) const {
  if (is_vocab(name) || ends_with(name, "qkv_proj.weight") || ends_with(name, "gate_up_proj.weight"))
    return TpSplit::custom;
  if (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight")) return TpSplit::cols;
  return TpSplit::whole;
}

Tensor LlamaTp::shard_custom(const std::string& name, const Tensor& full) const {
  return is_vocab(name) ? vocab_layer().shard(full) : comm::shard_blocks(full, row_blocks(name), tp());
}
Tensor LlamaTp::unshard_custom(const std::string& name, const Tensor& mine) const {
  return is_vocab(name) ? vocab_layer().unshard(mine) : comm::unshard_blocks(mine, row_blocks(name), tp());
}

LlamaTpBlock::LlamaTpBlock(const LlamaConfig& c, int layer, uint64_t seed, Device dev, comm::Communicator& tp,
                           LlamaTpOptions o)
    : local_heads_(c.n_head / tp.size()),
      local_kv_heads_(c.n_kv_head / tp.size()),
      head_size_(c.head_size()),
      cp_(o.cp),
      range_("layers." + std::to_string(layer)) {
  // The serial block's seeds (llama.cpp), so the full weights are the same.
  const int64_t C = c.n_embd, HS = c.head_size(), F = c.hidden();
  const uint64_t s = seed * 7919ull + uint64_t(layer) * 101ull;
  const InitOptions w{s, DType::f32, dev, 0.02f};
  auto seeded = [&](uint64_t k) {
    InitOptions i = w;
    i.seed = s + k;
    return i;
  };
  comm::TpLinearOptions qkv, gate_up, row;
  qkv.sequence_parallel = gate_up.sequence_parallel = row.sequence_parallel = o.sequence_parallel;
  qkv.blocks = {c.n_head * HS, c.n_kv_head * HS, c.n_kv_head * HS};
  gate_up.groups = 2;
  input_layernorm = register_module("input_layernorm", std::make_shared<RMSNorm>(C, w, c.rms_eps));
  qkv_proj = register_module(
      "self_attn.qkv_proj",
      std::make_shared<comm::ColumnParallelLinear>(C, (c.n_head + 2 * c.n_kv_head) * HS, Bias::no, seeded(1), tp, qkv));
  o_proj = register_module("self_attn.o_proj",
                           std::make_shared<comm::RowParallelLinear>(C, C, Bias::no, seeded(2), tp, row));
  post_attention_layernorm = register_module("post_attention_layernorm", std::make_shared<RMSNorm>(C, w, c.rms_eps));
  gate_up_proj = register_module(
      "mlp.gate_up_proj", std::make_shared<comm::ColumnParallelLinear>(C, 2 * F, Bias::no, seeded(3), tp, gate_up));
  down_proj =
      register_module("mlp.down_proj", std::make_shared<comm::RowParallelLinear>(F, C, Bias::no, seeded(4), tp, row));
}

Tensor LlamaTpBlock::forward(const Tensor& x, int64_t B, int64_t T, const Tensor& table, const Autocast& ac,
                             AttentionImpl attention) const {
  const profile::LayerRange r(range_);
  const int64_t H = local_heads_, KV = local_kv_heads_, HS = head_size_;
  // My heads' q | k | v, turned in place at my slice's positions.
  Tensor qkv = qkv_proj->forward(input_layernorm->forward(x, ac), ac).reshape({B, T, (H + 2 * KV) * HS});
  qkv = ac.cast(rope_(qkv, table, H + KV, cp_ ? cp_->rank() * T : 0));
  Tensor y = ac.cast(comm::packed_attention(qkv, H, Causal::yes, cp_, attention, KV));
  Tensor x1 = ac.cast(add(x, o_proj->forward(y.reshape({B * T, H * HS}), ac)));
  Tensor h = ac.cast(swiglu(gate_up_proj->forward(post_attention_layernorm->forward(x1, ac), ac)));
  return ac.cast(add(x1, down_proj->forward(h, ac)));
}

LlamaTp::LlamaTp(const LlamaConfig& c, uint64_t seed, Device dev, comm::Communicator& tp, LlamaTpOptions o)
    : TpModel(tp), cfg_(c), opt_(o), begin_(o.layer_begin), end_(o.layer_end < 0 ? c.n_layer : o.layer_end) {
  c.validate();
  ENGINE_CHECK(0 <= begin_ && begin_ < end_ && end_ <= c.n_layer, "llama pipeline stage: blocks [", begin_, ", ", end_,
               ") of n_layer ", c.n_layer);
  const int P = tp.size();
  ENGINE_CHECK(c.n_head % P == 0, "llama --tp ", P, ": n_head ", c.n_head, " does not divide by tp ", P);
  ENGINE_CHECK(c.n_kv_head % P == 0, "llama --tp ", P, ": n_kv_head ", c.n_kv_head, " does not divide by tp ", P,
               " (each rank takes whole K/V heads; K/V heads are not replicated)");
  ENGINE_CHECK(c.hidden() % P == 0, "llama --tp ", P, ": ffn_hidden ", c.hidden(), " does not divide by tp ", P);
  // The serial model's registration order, less what this stage lacks.
  if (first_stage() || (last_stage() && c.tie_embeddings))
    embed_tokens = register_module(
        "model.embed_tokens",
        std::make_shared<comm::VocabParallelEmbedding>(
            c.vocab_size, c.n_embd, InitOptions{seed * 31 + 1, DType::f32, dev, 0.02f}, tp, o.sequence_parallel));
  for (int64_t l = begin_; l < end_; ++l)
    layers.push_back(register_module("model.layers." + std::to_string(l),
                                     std::make_shared<LlamaTpBlock>(c, int(l), seed, dev, tp, o)));
  if (last_stage()) {
    norm = register_module("model.norm",
                           std::make_shared<RMSNorm>(c.n_embd, InitOptions{0, DType::f32, dev, 0.f}, c.rms_eps));
    // The untied head drawn as the serial Linear's (V, C) weight (the same
    // randn call), held as vocabulary rows like the table.
    if (!c.tie_embeddings)
      lm_head = register_module(
          "lm_head", std::make_shared<comm::VocabParallelEmbedding>(
                         c.vocab_size, c.n_embd, InitOptions{seed * 31 + 2, DType::f32, dev, 0.02f}, tp, false));
  }
  rope = rope_table(c.block_size, c.head_size(), c.rope, dev);
}

Shape LlamaTp::stage_rows(int64_t B, int64_t T) const {
  return {opt_.sequence_parallel ? B * T / tp().size() : B * T, cfg_.n_embd};
}

Tensor LlamaTp::forward(const Tensor& ids, Recompute recompute, const Autocast& ac,
                        std::optional<AttentionImpl> attention) const {
  ENGINE_CHECK(first_stage() && last_stage(), "llama: forward of a pipeline stage (blocks ", begin_, "..", end_ - 1,
               "): use stage_forward");
  return stage_forward(Tensor(), ids, recompute, ac, attention);
}

Tensor LlamaTp::stage_forward(const Tensor& in, const Tensor& ids, Recompute recompute, const Autocast& ac,
                              std::optional<AttentionImpl> attention) const {
  const AttentionImpl attn = attention.value_or(cfg_.attention);
  ENGINE_CHECK(ids.ndim() == 2 && ids.dtype() == DType::i32, "llama: token ids must be i32 (B, T), got ", ids.desc());
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t cp = opt_.cp ? opt_.cp->size() : 1;
  ENGINE_CHECK(T * cp <= cfg_.block_size, "llama: sequence length ", T * cp, " exceeds the model's block_size ",
               cfg_.block_size);
  ENGINE_CHECK(!opt_.sequence_parallel || (B * T) % tp().size() == 0, "llama --sequence_parallel: B T = ", B * T,
               " token rows do not divide by tp ", tp().size());
  Tensor x = in;
  if (first_stage()) {
    x = ac.cast(embed_tokens->forward(ids));  // summed over tp (or my block of rows)
  } else {
    ENGINE_CHECK(in.defined() && in.shape() == stage_rows(B, T), "llama pipeline stage (blocks ", begin_, "..",
                 end_ - 1, "): input ", in.desc(), ", expected rows ", shape_str(stage_rows(B, T)));
  }
  for (const auto& block : layers) {
    if (recompute == Recompute::yes) {
      const LlamaTpBlock* b = block.get();
      const Tensor table = rope;
      const profile::LayerTag tag(b->range());
      x = checkpoint([b, table, ac, B, T,
                      attn](const std::vector<Tensor>& xs) { return b->forward(xs[0], B, T, table, ac, attn); },
                     {x});
    } else {
      x = block->forward(x, B, T, rope, ac, attn);
    }
  }
  if (!last_stage()) return x;
  Tensor h = norm->forward(x, ac);
  // The head is column parallel over the vocabulary: my logits only.
  h = opt_.sequence_parallel ? comm::gather_from_sp(ac.cast(h), tp()) : comm::copy_to_tp(ac.cast(h), tp());
  const Tensor& w = lm_head ? lm_head->weight : embed_tokens->weight;
  return ac.cast(matmul(h, ac.cast(w), Trans::N, Trans::T));
}

Tensor LlamaTp::loss(const Tensor& ids, const Tensor& targets, Recompute recompute, const Autocast& ac) const {
  ENGINE_CHECK(targets.shape() == ids.shape(), "llama: targets ", targets.desc(), " do not match ids ", ids.desc());
  return stage_loss(forward(ids, recompute, ac), targets);
}

Tensor LlamaTp::stage_loss(const Tensor& logits, const Tensor& targets) const {
  return comm::vocab_parallel_cross_entropy(Autocast().f32(logits), targets.reshape({targets.numel()}), cfg_.vocab_size,
                                            tp());
}

std::vector<Tensor> LlamaTp::partial_parameters() const {
  std::vector<Tensor> partial;
  if (!opt_.sequence_parallel || tp().size() == 1) return partial;
  for (const auto& b : layers) {
    partial.push_back(b->input_layernorm->weight);
    partial.push_back(b->post_attention_layernorm->weight);
  }
  if (norm) partial.push_back(norm->weight);
  return partial;
}

}  // namespace eng::models
