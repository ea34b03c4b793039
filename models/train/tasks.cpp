// The train program's models by name (tasks.h).
#include "models/train/tasks.h"

#include "models/train/gpt2_task.h"
#include "models/train/llama_task.h"
#include "models/train/vit_task.h"

namespace eng::models {

std::unique_ptr<TrainTask> make_task(const TrainConfig& c, const BatchPlan& plan, Device dev, const ModelGrid& mg) {
  const std::string model = c.s("model");
  if (model == "gpt2") return make_gpt2_task(c, plan, dev, mg);
  if (model == "llama") return make_llama_task(c, plan, dev, mg);
  return make_vit_task(c, plan, dev, mg);
}

std::vector<int64_t> model_stage_layers(const TrainConfig& c) {
  const std::string model = c.s("model");
  if (model == "gpt2") return gpt2_stage_layers(c);
  if (model == "llama") return llama_stage_layers(c);
  return vit_stage_layers(c);
}

}  // namespace eng::models
