// Llama weights <-> Hugging Face's LlamaForCausalLM layout (safetensors and
// config.json), and the training checkpoint built on them.
// The file holds q_proj, k_proj, v_proj and gate_proj, up_proj apart, as
// transformers names them; the model packs each group into one matrix
// (llama.h), split and joined here by rows. A tied model's file has no
// lm_head.weight (transformers drops the duplicate); an lm_head.weight in
// a file loaded into a tied model is ignored.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/optim/optimizer.h"
#include "models/checkpoint.h"
#include "models/llama/llama.h"

namespace eng::models {

// Tensors named as the model's parameters (the parameters themselves, or
// their gradients) under Hugging Face's names, the packed ones split by
// rows; fp32 on the host.
std::vector<std::pair<std::string, Tensor>> llama_hf_split(const LlamaConfig& c,
                                                           const std::vector<std::pair<std::string, Tensor>>& named);
// The model's parameters so (what model.safetensors holds).
std::vector<std::pair<std::string, Tensor>> llama_hf_tensors(const Llama& model);
void save_llama_weights(const std::string& path, const Llama& model);
// A safetensors file, or a directory holding model.safetensors (errors name
// the file and the missing or mis-shaped tensor).
void load_llama_weights(const std::string& path, Llama& model);

// config.json for LlamaForCausalLM.from_pretrained.
nlohmann::json llama_hf_config(const LlamaConfig& c);
// The shape in a Hugging Face config.json (a file, or a directory holding
// one): errors name the file and the key; a rope_scaling other than llama3's,
// biases, or a head_dim other than hidden_size / heads are refused in one line.
LlamaConfig llama_config_from_hf(const std::string& path);

// A checkpoint directory: model.safetensors and config.json as
// LlamaForCausalLM.from_pretrained reads them, optimizer.safetensors,
// state.json (models/checkpoint.h).
void save_llama_checkpoint(const std::string& dir, const Llama& model,
                           const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                           const nlohmann::json& config, const nlohmann::json& extra = nlohmann::json::object());
nlohmann::json load_llama_checkpoint(const std::string& dir, Llama& model, Optimizer& opt);

}  // namespace eng::models
