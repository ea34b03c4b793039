// The TensorBoard tags of a metrics.jsonl line: every number of the line,
// under a tag a person reads (docs/train.md, "TensorBoard", has the table):
//   loss, lr, grad_norm, ...          -> train/loss, train/lr, train/grad_norm
//   tokens_per_s, images_per_s, flops_per_s, mfu -> perf/...
//   mem_peak_bytes, memory_per_rank.X -> memory/peak_bytes, memory/per_rank/X
//   data_wait_ms, data_mb_per_s       -> data/wait_ms, data/mb_per_s
//   val_loss, val_accuracy, ...       -> val/loss, val/accuracy
//   val_rmse [per channel]            -> val/rmse/channel_<c> (c from the line's "channels")
// "step" is the event's step; "channels", strings and nulls (mfu with no
// peak) are not scalars.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace eng::models {

std::vector<std::pair<std::string, float>> tb_scalars(const nlohmann::json& metrics_line);

}  // namespace eng::models
