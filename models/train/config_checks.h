// train's options checked before anything is opened or written: the ones
// every model reads (batch and step counts, lr, the grid's tp, cp and pp,
// ZeRO, precision, resume), then each model's own (gpt2_config,
// check_vit_options). Every rank runs them alike, so their error is said once.
#pragma once
#include <string>
#include <vector>

#include "models/train/train_config.h"

namespace eng::models {

void validate_config(const TrainConfig& c);
// --resume: the checkpoint's state.json against this run: the model's shape
// keys and the seed as configured, its step within steps.
void check_resumed_config(const std::string& ckpt_dir, const nlohmann::json& state, const TrainConfig& cfg,
                          const std::vector<std::string>& shape_keys, int64_t steps);
// --resume, before anything is loaded: 8-bit AdamW's state (quantized per tp
// shard) resumes at its tp. (Another optimizer: load_checkpoint_dir refuses.)
void check_resume_optimizer(const std::string& ckpt_dir, const TrainConfig& cfg);

}  // namespace eng::models
