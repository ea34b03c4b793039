#include "models/gpt2/kv_decoder.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng::models {

KvDecoder::KvDecoder(const GPT2& model, bool kv_cache) : model_(model), use_cache_(kv_cache) {
  const GPT2Config& c = model.config();
  if (!use_cache_) return;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    k_.push_back(Tensor::zeros({c.block_size, c.n_embd}, DType::f32, model.device()));
    v_.push_back(Tensor::zeros({c.block_size, c.n_embd}, DType::f32, model.device()));
  }
}

std::vector<float> KvDecoder::append(const std::vector<int32_t>& ids) {
  ENGINE_CHECK(!ids.empty(), "generate: no tokens to append (a prompt needs at least one)");
  const GPT2Config& c = model_.config();
  for (int32_t t : ids)
    ENGINE_CHECK(t >= 0 && t < c.vocab_size, "generate: token ", t, " is outside the model's vocabulary of ",
                 c.vocab_size);
  seq_.insert(seq_.end(), ids.begin(), ids.end());
  NoGradGuard ng;
  if (!use_cache_ || length() > c.block_size) {
    // The window path: the last block_size tokens from position 0.
    const int64_t T = std::min(length(), c.block_size);
    const std::vector<int32_t> window(seq_.end() - T, seq_.end());
    if (!use_cache_) {
      const Tensor logits = model_.forward(Tensor::from_ints(window, {1, T}, model_.device()), Recompute::no,
                                           Autocast(), AttentionImpl::ours);
      return narrow(logits, 0, T - 1, 1).to_vector();
    }
    cached_ = 0;  // the window slid: every position moved
    return extend(window);
  }
  return extend(ids);
}

std::vector<float> KvDecoder::extend(const std::vector<int32_t>& ids) {
  const GPT2Config& c = model_.config();
  const int64_t n = int64_t(ids.size()), C = c.n_embd, NH = c.n_head, HS = C / NH, at = cached_;
  const Device dev = model_.device();
  Tensor x =
      add_positions(model_.wte->forward(Tensor::from_ints(ids, {1, n}, dev)), model_.wpe->weight, at, DType::f32);
  for (size_t l = 0; l < model_.h.size(); ++l) {
    const GPT2Block& b = *model_.h[l];
    const std::vector<Tensor> qkv = split(b.c_attn->forward(b.ln_1->forward(x)), {C, C, C}, 2);
    k_[l].slice(at, at + n).copy_from(qkv[1].reshape({n, C}));
    v_[l].slice(at, at + n).copy_from(qkv[2].reshape({n, C}));
    const Tensor K = k_[l].slice(0, at + n).reshape({1, at + n, NH, HS});
    const Tensor V = v_[l].slice(0, at + n).reshape({1, at + n, NH, HS});
    const Tensor y = attention(qkv[0].reshape({1, n, NH, HS}), K, V, Causal::yes, AttentionImpl::ours, at);
    const Tensor x1 = b.attn_proj->forward_residual(y.reshape({1, n, C}), x, Autocast());
    x = b.mlp_proj->forward_residual(b.c_fc->forward_gelu(b.ln_2->forward(x1)), x1, Autocast());
  }
  cached_ = at + n;
  const Tensor last = narrow(model_.ln_f->forward(x).reshape({n, C}), 0, n - 1, 1);
  return matmul(last, model_.wte->weight, Trans::N, Trans::T).to_vector();
}

}  // namespace eng::models
