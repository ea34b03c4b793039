// The train program's models by name (--model): their tasks and pipeline stages.
#pragma once
#include <memory>
#include <vector>

#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/train_dist.h"

namespace eng::models {

// gpt2, llama or vit (validate_config has checked the name).
std::unique_ptr<TrainTask> make_task(const TrainConfig& c, const BatchPlan& plan, Device dev, const ModelGrid& mg);
// --pp's blocks per stage for the model.
std::vector<int64_t> model_stage_layers(const TrainConfig& c);

}  // namespace eng::models
