// The train program's --attention option (ours | cudnn): the checks that
// say, before anything runs, why cuDNN's fused attention cannot serve this
// run (kernels/cudnn/cudnn.h), so a run never falls back to ours silently.
#pragma once
#include "engine/device.h"
#include "models/train/train_config.h"

namespace eng::models {

// The config alone: the name; for cudnn, a bf16/fp16 precision level and a
// head size (n_embd / n_head) cuDNN takes. Every rank finds the same.
void check_attention_option(const TrainConfig& c);
// For cudnn, the run's device must be cuda. Every rank finds the same.
void check_attention_device(const TrainConfig& c, Device dev);
// For cudnn, the library loads and a GPU answers (each rank's own finding).
void check_cudnn_loads(const TrainConfig& c);

}  // namespace eng::models
