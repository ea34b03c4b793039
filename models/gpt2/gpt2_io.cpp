// GPT-2 safetensors export/import and training checkpoints.
#include "models/gpt2/gpt2_io.h"

#include <algorithm>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "io/safetensors.h"
#include "models/checkpoint.h"

namespace eng::models {

void save_gpt2_weights(const std::string& path, const GPT2& model) {
  NoGradGuard ng;
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : model.named_parameters()) {
    Tensor t = p.detach();
    if (gpt2_is_conv1d_weight(name)) t = transpose(t, 0, 1);  // (out, in) -> Conv1D's (in, out)
    out.emplace_back(name, t.to(kCPU));
  }
  const GPT2Config& c = model.config();
  save_safetensors(path, out,
                   {{"format", "pt"},
                    {"model", "gpt2"},
                    {"n_layer", std::to_string(c.n_layer)},
                    {"n_head", std::to_string(c.n_head)},
                    {"n_embd", std::to_string(c.n_embd)},
                    {"n_positions", std::to_string(c.block_size)},
                    {"vocab_size", std::to_string(c.vocab_size)}});
}

void load_gpt2_weights(const std::string& path, GPT2& model) {
  NoGradGuard ng;
  const SafetensorsFile f = load_safetensors(path);
  for (auto& [name, p] : model.named_parameters()) {
    const std::string alt = "transformer." + name;
    ENGINE_USER_CHECK(f.has(name) || f.has(alt), path, ": missing tensor '", name, "' (nor '", alt, "')");
    Tensor t = f.has(name) ? f.get(name) : f.get(alt);
    ENGINE_USER_CHECK(is_floating(t.dtype()), path, ": tensor '", name, "' has dtype ", dtype_name(t.dtype()));
    t = t.to(DType::f32);
    if (gpt2_is_conv1d_weight(name) && t.ndim() == 2) t = transpose(t, 0, 1);
    ENGINE_USER_CHECK(t.shape() == p.shape(), path, ": tensor '", name, "' has shape ", shape_str(t.shape()),
                      gpt2_is_conv1d_weight(name) ? " (after the Conv1D transpose)" : "", ", the model needs ",
                      shape_str(p.shape()));
    Tensor dst = p;
    dst.copy_from(t.to(p.device()));
  }
}

void save_checkpoint(const std::string& dir, const GPT2& model, const Optimizer& opt, int64_t step,
                     const nlohmann::json& config, const nlohmann::json& extra) {
  save_checkpoint(dir, model, opt.state(), step, config, extra);
}

void save_checkpoint(const std::string& dir, const GPT2& model,
                     const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                     const nlohmann::json& config, const nlohmann::json& extra, const ExtraFiles& files) {
  // config.json makes the directory loadable by GPT2LMHeadModel.from_pretrained.
  const GPT2Config& c = model.config();
  // GPT-2's <|endoftext|> (50256) is the last id of its 50257 tokens; a
  // smaller vocabulary (bytes: 256) gets its own last id, so that the ids
  // exist in the model (Hugging Face warns otherwise).
  const int64_t eot = std::min<int64_t>(50256, c.vocab_size - 1);
  const nlohmann::json hf{{"architectures", {"GPT2LMHeadModel"}},
                          {"model_type", "gpt2"},
                          {"bos_token_id", eot},
                          {"eos_token_id", eot},
                          {"vocab_size", c.vocab_size},
                          {"n_positions", c.block_size},
                          {"n_ctx", c.block_size},
                          {"n_embd", c.n_embd},
                          {"n_layer", c.n_layer},
                          {"n_head", c.n_head},
                          {"activation_function", "gelu_new"},
                          {"layer_norm_epsilon", 1e-5},
                          {"tie_word_embeddings", true}};
  save_checkpoint_dir(
      dir, [&](const std::string& path) { save_gpt2_weights(path, model); }, hf, opt_state, step, config, extra, files);
}

ExtraFiles gpt2_tokenizer_files(const text::Bpe& bpe, int64_t block_size) {
  const std::string eot = bpe.eot() >= 0 ? bpe.token_bytes(bpe.eot()) : std::string("<|endoftext|>");
  const nlohmann::json cfg{{"tokenizer_class", "GPT2Tokenizer"},
                           {"model_max_length", block_size},
                           {"bos_token", eot},
                           {"eos_token", eot},
                           {"unk_token", eot},
                           {"add_prefix_space", false}};
  return {{"vocab.json", bpe.hf_vocab_json()},
          {"merges.txt", bpe.hf_merges_txt()},
          {"tokenizer_config.json", cfg.dump(2) + "\n"}};
}

nlohmann::json load_checkpoint(const std::string& dir, GPT2& model, Optimizer& opt) {
  return load_checkpoint_dir(
      dir, [&](const std::string& path) { load_gpt2_weights(path, model); }, opt);
}

}  // namespace eng::models
