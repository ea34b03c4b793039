// A Llama as a training task (task.h): the same token files, sampler,
// validation and text samples as GPT-2's task, and checkpoints in Hugging
// Face's LlamaForCausalLM layout (models/llama/llama_io.h). With a split
// grid the model is LlamaTp (models/llama/llama_tp.h): tp (with sequence
// parallelism), cp and pp, checkpoints gathered to the one-process layout.
// --init_from a LlamaForCausalLM directory (or its model.safetensors) takes
// the shape from its config.json (llama_shape_from_init).
#pragma once
#include <memory>

#include "models/llama/llama.h"
#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/train_dist.h"

namespace eng::models {

// The model's shape from the config, with the checks every rank makes alike.
LlamaConfig llama_config(const TrainConfig& c);

// --pp: blocks per stage, from --pp_layers or balanced by FLOPs.
std::vector<int64_t> llama_stage_layers(const TrainConfig& c);

// --model llama --init_from P: the shape keys (vocab_size, block_size,
// n_layer, n_head, n_kv_head, n_embd, ffn_hidden, rms_eps, rope_*,
// tie_embeddings) set from P's config.json (P a directory holding it, or a
// file beside it), so the run, its state.json and its resume have the
// loaded model's shape; a key also set by the user to another value is an
// error naming both. Nothing for other models, or without a config.json.
void llama_shape_from_init(TrainConfig& c);

std::unique_ptr<TrainTask> make_llama_task(const TrainConfig& c, const BatchPlan& plan, Device dev,
                                           const ModelGrid& mg = {});

}  // namespace eng::models
