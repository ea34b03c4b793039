// --optimizer: the optimizer train steps with (adamw, adamw8bit, adafactor,
// sgd; engine/optim/optimizer.h), its options, the combinations refused with
// the reason, and its start-up line. docs/optimizers.md.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/optim/optimizer.h"
#include "engine/optim/schedule.h"
#include "models/train/train_config.h"

namespace eng::models {

// groups: the model's decay groups (decay_groups); lr: the schedule's peak.
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& c, std::vector<ParamGroup> groups);
// The learning rate of each of `steps` steps: --lr, --min_lr, --warmup_steps,
// --lr_schedule, --wsd_decay_fraction (checked by check_optimizer_options).
WarmupDecayLR make_lr_schedule(const TrainConfig& c, int64_t steps);
// One-line errors for an unknown name or a combination not supported (part of validate_config).
void check_optimizer_options(const TrainConfig& c);
// Once --device is resolved (auto: cpu where no GPU answers): sgd on the cpu only.
void check_optimizer_device(const TrainConfig& c, Device dev);
// The state's bytes per parameter, for the memory plan before the first
// step: 8 (adamw), 2.03 (adamw8bit), 4 (sgd), ~0 (adafactor: a bound of 0.1).
double optimizer_bytes_per_param(const TrainConfig& c);
// "optimizer: adafactor (external lr, ...)" for the start-up lines.
std::string optimizer_line(const TrainConfig& c);

}  // namespace eng::models
