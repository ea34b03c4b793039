// Temperature / top-k sampling loop.
#include "models/gpt2/sample.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "engine/autograd.h"
#include "kernels/rng.h"

namespace eng::models {

std::vector<int32_t> gpt2_generate(const GPT2& model, std::vector<int32_t> tokens, int64_t n_new, double temperature,
                                   int64_t top_k, uint64_t seed) {
  const LogitsFn logits = [&model](const std::vector<int32_t>& window) {
    // Our attention at every length (GPT2::forward says why not cuDNN's).
    return model
        .forward(Tensor::from_ints(window, {1, int64_t(window.size())}, model.device()), Recompute::no, Autocast(),
                 AttentionImpl::ours)
        .to_vector();
  };
  return generate(logits, model.config().vocab_size, model.config().block_size, std::move(tokens), n_new, temperature,
                  top_k, seed);
}

std::vector<int32_t> generate(const LogitsFn& logits_of, int64_t V, int64_t ctx, std::vector<int32_t> tokens,
                              int64_t n_new, double temperature, int64_t top_k, uint64_t seed) {
  ENGINE_CHECK(!tokens.empty(), "generate: empty prompt");
  ENGINE_CHECK(temperature > 0, "generate: temperature must be > 0, got ", temperature);
  NoGradGuard ng;
  for (int64_t k = 0; k < n_new; ++k) {
    const int64_t T = std::min<int64_t>(int64_t(tokens.size()), ctx);
    std::vector<int32_t> window(tokens.end() - T, tokens.end());
    const std::vector<float> logits = logits_of(window);
    ENGINE_CHECK(int64_t(logits.size()) == T * V, "generate: ", logits.size(), " logits for ", T, " x ", V);
    // Last position's logits, scaled by 1/temperature, softmaxed over the top k.
    std::vector<std::pair<double, int32_t>> scored(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v)
      scored[size_t(v)] = {double(logits[size_t((T - 1) * V + v)]) / temperature, int32_t(v)};
    const int64_t keep = top_k > 0 && top_k < V ? top_k : V;
    std::partial_sort(scored.begin(), scored.begin() + keep, scored.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    double total = 0;
    for (int64_t i = 0; i < keep; ++i) total += std::exp(scored[size_t(i)].first - scored[0].first);
    double u = double(rng::uniform(seed, uint64_t(k))) * total, acc = 0;
    int32_t pick = scored[size_t(keep - 1)].second;
    for (int64_t i = 0; i < keep; ++i) {
      acc += std::exp(scored[size_t(i)].first - scored[0].first);
      if (u < acc) {
        pick = scored[size_t(i)].second;
        break;
      }
    }
    tokens.push_back(pick);
  }
  return tokens;
}

}  // namespace eng::models
