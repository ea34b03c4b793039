// GPT-2 as a training task (task.h): flat uint16 token files, random
// windows for training (io/token_file.h), the validation loss over the first
// windows of the validation file, text samples, and checkpoints in Hugging
// Face's GPT-2 layout (models/gpt2/gpt2_io.h). With a tp communicator of
// more than one rank the model is split over it (models/gpt2/gpt2_tp.h); its
// checkpoints are gathered to the same layout, so they load at any tp. With
// cp ranks each takes its slice of every window's positions.
#pragma once
#include <memory>

#include "comm/communicator.h"
#include "models/gpt2/gpt2.h"
#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/train_dist.h"

namespace eng::models {

// The model's shape from the config, with the checks every rank makes alike.
GPT2Config gpt2_config(const TrainConfig& c);

// --pp: blocks per stage, from --pp_layers or balanced by FLOPs (a block's
// 24 C^2 + 4 T C per token forward; the tied head's 2 V C on the last stage).
std::vector<int64_t> gpt2_stage_layers(const TrainConfig& c);

// With mg.split(), the model is split over tp and cp (gpt2_tp.h); each cp
// rank reads whole windows and keeps its positions.
std::unique_ptr<TrainTask> make_gpt2_task(const TrainConfig& c, const BatchPlan& plan, Device dev,
                                          const ModelGrid& mg = {});

}  // namespace eng::models
