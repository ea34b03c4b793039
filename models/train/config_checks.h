// train's options checked before anything is opened or written: the ones
// every model reads (batch and step counts, lr, the grid's tp, cp and pp,
// ZeRO, precision, resume), then each model's own (gpt2_config,
// check_vit_options). Every rank runs them alike, so their error is said once.
#pragma once
#include "models/train/train_config.h"

namespace eng::models {

void validate_config(const TrainConfig& c);

}  // namespace eng::models
