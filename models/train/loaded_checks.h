// The numbers a run starts from, checked before the first step. A NaN
// weight from --resume or --init_from, or optimizer state no optimizer can
// produce (a negative second moment, a negative 8-bit scale), would
// otherwise surface steps later as "loss is nan (diverged: lower lr?)" and
// send the user after the learning rate. Each finding is one line naming
// the file, the tensor and the first bad element.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace eng::models {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Every floating-point parameter finite; `file` is what they were loaded from.
void check_loaded_weights(const NamedTensors& params, const std::string& file);
// Every floating-point state tensor finite, and the kinds that hold squares
// or scales (exp_avg_sq*, *absmax: AdamW, 8-bit AdamW, Adafactor's rows and
// columns) >= 0. 8-bit codes (u8) may hold any value.
void check_loaded_state(const NamedTensors& state, const std::string& file);

}  // namespace eng::models
