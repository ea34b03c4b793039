// A training checkpoint directory, for any model: the weights in the model's
// own file layout (written and read by the callbacks), config.json (the
// model's config in its ecosystem's form, so Hugging Face or timm code can
// load the directory), optimizer.safetensors and state.json
// ({"step": k, "config": {...}} + what the train program adds: sampler and
// RNG positions). Written to "<dir>.tmp" and renamed over <dir>, so an
// interrupted save leaves the previous checkpoint whole.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/optim/optimizer.h"

namespace eng::models {

using WeightsIO = std::function<void(const std::string& path)>;  // writes or reads model.safetensors
// Other files the directory carries (name, content): the tokenizer's, so the
// ecosystem's loaders find it beside the weights.
using ExtraFiles = std::vector<std::pair<std::string, std::string>>;

void save_checkpoint_dir(const std::string& dir, const WeightsIO& save_weights, const nlohmann::json& model_config,
                         const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                         const nlohmann::json& config, const nlohmann::json& extra, const ExtraFiles& files = {});
// A save killed between its two renames leaves the previous checkpoint as
// "<dir>.old" and no <dir>: renames it back (true), before a run reads or
// replaces it. One process only (train: rank 0, holding the out_dir lock).
bool recover_checkpoint_dir(const std::string& dir);
// Loads weights and optimizer state; returns the state.json object.
nlohmann::json load_checkpoint_dir(const std::string& dir, const WeightsIO& load_weights, Optimizer& opt);
// dir/state.json, checked (a missing file, bad JSON, a bad step are errors naming it).
nlohmann::json read_checkpoint_state(const std::string& dir);

}  // namespace eng::models
