// Autoregressive sampling: temperature, top-k and top-p (nucleus) over one
// row of logits, and the loop that feeds each token back. The training
// samples run the loop over any model through LogitsFn (the context cropped
// to block_size, the full forward rerun per token, as nanoGPT's generate());
// the generate program feeds it from a KV cache (models/gpt2/kv_decoder.h).
// Draws come from the counter-based RNG at (seed, token index), so a sample
// is reproducible from its seed.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace eng::models {

struct SampleOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token, the lowest id of equals)
  int64_t top_k = 0;         // keep the k most likely tokens (0: all)
  double top_p = 1.0;        // then the fewest whose probabilities reach p (1: all)
  uint64_t seed = 1337;
};

// Draw number k of a run from V logits: softmax(logits / temperature) over
// the tokens top_k and top_p leave, renormalised.
int32_t pick_token(const float* logits, int64_t V, const SampleOptions& o, uint64_t k);

// The loop over any model: logits(window) returns the T x V logits of a
// window of T <= ctx ids, row-major, on the host (a tensor-parallel model
// gathers them; every rank of its tp group then runs the loop in step).
// Returns the prompt and the n_new tokens after it.
using LogitsFn = std::function<std::vector<float>(const std::vector<int32_t>& window)>;
std::vector<int32_t> generate(const LogitsFn& logits, int64_t V, int64_t ctx, std::vector<int32_t> prompt,
                              int64_t n_new, const SampleOptions& o);

}  // namespace eng::models
