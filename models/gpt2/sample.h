// Autoregressive sampling from GPT-2 with temperature and top-k, as nanoGPT's
// generate(): the context is cropped to block_size and the full forward is
// rerun per token (no KV cache: the models trained here are small).
// Draws come from the counter-based RNG at (seed, token index), so a sample
// is reproducible from its seed.
#pragma once
#include <cstdint>
#include <vector>

#include "models/gpt2/gpt2.h"

namespace eng::models {

std::vector<int32_t> gpt2_generate(const GPT2& model, std::vector<int32_t> prompt, int64_t n_new, double temperature,
                                   int64_t top_k, uint64_t seed);

}  // namespace eng::models
