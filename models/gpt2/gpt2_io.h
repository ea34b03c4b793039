// GPT-2 weights <-> safetensors in Hugging Face's layout, and the training
// checkpoint (weights + optimizer state + run state) used by --resume.
// Layout: the four Conv1D matrices per block are stored (in, out) as
// Hugging Face does; everything else as the engine holds it. Loading accepts
// names with or without the "transformer." prefix (GPT2LMHeadModel's state
// dict vs the hub's model.safetensors) and ignores lm_head.weight (tied) and
// the attn.bias / attn.masked_bias buffers older files carry.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/optim/optimizer.h"
#include "io/bpe.h"
#include "models/checkpoint.h"
#include "models/gpt2/gpt2.h"

namespace eng::models {

void save_gpt2_weights(const std::string& path, const GPT2& model);
// Errors name the file and the missing or mis-shaped tensor.
void load_gpt2_weights(const std::string& path, GPT2& model);

// A checkpoint directory: model.safetensors, config.json (Hugging Face's, so
// GPT2LMHeadModel.from_pretrained(dir) loads it), optimizer.safetensors and
// state.json ({"step": k, "config": {...}}). Written to "<dir>.tmp" and
// renamed over <dir>, so an interrupted save leaves the previous checkpoint.
// `extra` is merged into state.json (the train program records its sampler
// and RNG positions there).
void save_checkpoint(const std::string& dir, const GPT2& model, const Optimizer& opt, int64_t step,
                     const nlohmann::json& config, const nlohmann::json& extra = nlohmann::json::object());
// The same with the optimizer state already collected (ZeRO gathers it with
// every rank taking part; rank 0 then writes).
void save_checkpoint(const std::string& dir, const GPT2& model,
                     const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                     const nlohmann::json& config, const nlohmann::json& extra = nlohmann::json::object(),
                     const ExtraFiles& files = {});
// GPT-2's tokenizer files for a checkpoint directory, as the Hugging Face hub
// has them beside GPT-2's weights: vocab.json, merges.txt and
// tokenizer_config.json (model_max_length = block_size, <|endoftext|> as
// bos, eos and unk), so AutoTokenizer.from_pretrained(dir) reads the run's
// tokenizer and the generate program finds it there.
ExtraFiles gpt2_tokenizer_files(const text::Bpe& bpe, int64_t block_size);
// Loads weights and optimizer state; returns the state.json object.
nlohmann::json load_checkpoint(const std::string& dir, GPT2& model, Optimizer& opt);

}  // namespace eng::models
