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
                     const nlohmann::json& config, const nlohmann::json& extra = nlohmann::json::object());
// Loads weights and optimizer state; returns the state.json object.
nlohmann::json load_checkpoint(const std::string& dir, GPT2& model, Optimizer& opt);

}  // namespace eng::models
