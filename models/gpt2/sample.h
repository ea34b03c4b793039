// Autoregressive sampling from GPT-2 with temperature and top-k, as nanoGPT's
// generate(): the context is cropped to block_size and the full forward is
// rerun per token (no KV cache: the models trained here are small).
// Draws come from the counter-based RNG at (seed, token index), so a sample
// is reproducible from its seed.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "models/gpt2/gpt2.h"

namespace eng::models {

std::vector<int32_t> gpt2_generate(const GPT2& model, std::vector<int32_t> prompt, int64_t n_new, double temperature,
                                   int64_t top_k, uint64_t seed);

// The same loop over any model: logits(window) returns the T x V logits of a
// window of T <= ctx ids, row-major, on the host (a tensor-parallel model
// gathers them; every rank of its tp group then runs the loop in step).
using LogitsFn = std::function<std::vector<float>(const std::vector<int32_t>& window)>;
std::vector<int32_t> generate(const LogitsFn& logits, int64_t V, int64_t ctx, std::vector<int32_t> prompt,
                              int64_t n_new, double temperature, int64_t top_k, uint64_t seed);

}  // namespace eng::models
