// Temperature / top-k / top-p sampling and the loop.
#include "models/gpt2/sample.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "engine/autograd.h"
#include "kernels/rng.h"

namespace eng::models {

int32_t pick_token(const float* logits, int64_t V, const SampleOptions& o, uint64_t k) {
  ENGINE_CHECK(V > 0, "sample: no logits");
  ENGINE_CHECK(o.temperature >= 0, "sample: temperature must be >= 0, got ", o.temperature);
  ENGINE_CHECK(o.top_p > 0 && o.top_p <= 1, "sample: top_p must be in (0, 1], got ", o.top_p);
  if (o.temperature == 0) return int32_t(std::max_element(logits, logits + V) - logits);
  // Shifted by the largest logit before the division: a tiny temperature
  // then sends the others to -inf (weight 0), never inf - inf.
  const double hi = double(*std::max_element(logits, logits + V));
  std::vector<std::pair<double, int32_t>> scored(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) scored[size_t(v)] = {(double(logits[v]) - hi) / o.temperature, int32_t(v)};
  int64_t keep = o.top_k > 0 && o.top_k < V ? o.top_k : V;
  auto more_likely = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::partial_sort(scored.begin(), scored.begin() + keep, scored.end(), more_likely);
  const double top = scored[0].first;
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += std::exp(scored[size_t(i)].first - top);
  if (o.top_p < 1) {  // the fewest most likely whose share of the kept mass reaches top_p
    double acc = 0;
    for (int64_t i = 0; i < keep; ++i) {
      acc += std::exp(scored[size_t(i)].first - top);
      if (acc >= o.top_p * total) {
        keep = i + 1;
        total = acc;
        break;
      }
    }
  }
  const double u = double(rng::uniform(o.seed, k)) * total;
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += std::exp(scored[size_t(i)].first - top);
    if (u < acc) return scored[size_t(i)].second;
  }
  return scored[size_t(keep - 1)].second;
}

std::vector<int32_t> generate(const LogitsFn& logits_of, int64_t V, int64_t ctx, std::vector<int32_t> tokens,
                              int64_t n_new, const SampleOptions& o) {
  ENGINE_CHECK(!tokens.empty(), "generate: empty prompt");
  NoGradGuard ng;
  for (int64_t k = 0; k < n_new; ++k) {
    const int64_t T = std::min<int64_t>(int64_t(tokens.size()), ctx);
    std::vector<int32_t> window(tokens.end() - T, tokens.end());
    const std::vector<float> logits = logits_of(window);
    ENGINE_CHECK(int64_t(logits.size()) == T * V, "generate: ", logits.size(), " logits for ", T, " x ", V);
    tokens.push_back(pick_token(logits.data() + (T - 1) * V, V, o, uint64_t(k)));
  }
  return tokens;
}

}  // namespace eng::models
