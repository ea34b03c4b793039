// Text generation (models/gpt2/kv_decoder.h, models/gpt2/sample.h): greedy
// decoding from the tiny GPT-2 fixture gives PyTorch's 64 tokens (float64,
// scripts/fixtures_gpt2.py) with and without the KV cache, on the cpu and on
// emu, past block_size where the window slides; the cached path's logits
// equal the full window's at every step; top-k and top-p draw only from the
// tokens they allow, as often as their renormalised probabilities say.
#include <cmath>
#include <map>
#include <memory>

#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_io.h"
#include "models/gpt2/kv_decoder.h"
#include "models/gpt2/sample.h"
#include "tests/parity_util.h"

using namespace eng;
using namespace eng::models;
using namespace eng::test;

namespace {

std::unique_ptr<GPT2> fixture_model(Device dev) {
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  GPT2Config c;
  c.vocab_size = std::stoll(f.metadata.at("vocab_size"));
  c.block_size = std::stoll(f.metadata.at("block_size"));
  c.n_layer = std::stoll(f.metadata.at("n_layer"));
  c.n_head = std::stoll(f.metadata.at("n_head"));
  c.n_embd = std::stoll(f.metadata.at("n_embd"));
  auto m = std::make_unique<GPT2>(c, 1, dev);
  load_gpt2_weights(std::string(ENGINE_FIXTURE_DIR) + "/gpt2_tiny.safetensors", *m);
  return m;
}

std::vector<int32_t> ints(const Tensor& t) {
  std::vector<int32_t> v;
  for (double x : values(t)) v.push_back(int32_t(x));
  return v;
}

void greedy_matches_pytorch(Device dev) {
  const SafetensorsFile g = load_fixture("gpt2_greedy.safetensors");
  const std::vector<int32_t> prompt = ints(g.get("prompt")), want = ints(g.get("tokens"));
  const auto model = fixture_model(dev);
  REQUIRE(int64_t(prompt.size() + want.size()) > model->config().block_size);  // the window slides
  for (bool cache : {true, false}) {
    KvDecoder dec(*model, cache);
    std::vector<float> logits = dec.append(prompt);
    std::vector<int32_t> got;
    const SampleOptions greedy{0.0, 0, 1.0, 1};
    for (size_t k = 0; k < want.size(); ++k) {
      got.push_back(pick_token(logits.data(), model->config().vocab_size, greedy, k));
      logits = dec.append({got.back()});
    }
    INFO("kv cache " << cache << " on " << dev.str());
    CHECK(got == want);
  }
}

void cache_equals_window(Device dev) {
  const auto model = fixture_model(dev);
  const int64_t V = model->config().vocab_size;
  KvDecoder cached(*model, true), full(*model, false);
  // A prompt of 3, then one token at a time, then a chunk of 4: past block_size (16).
  std::vector<std::vector<int32_t>> steps = {{5, 1, 30}};
  for (int i = 0; i < 10; ++i) steps.push_back({int32_t((7 * i + 3) % V)});
  steps.push_back({2, 4, 6, 8});
  for (int i = 0; i < 6; ++i) steps.push_back({int32_t((5 * i + 1) % V)});
  for (const auto& ids : steps) {
    const std::vector<float> a = cached.append(ids), b = full.append(ids);
    REQUIRE(a.size() == size_t(V));
    double worst = 0;
    for (size_t v = 0; v < a.size(); ++v)
      worst = std::max(worst, std::abs(double(a[v]) - b[v]) / (1e-5 + std::abs(b[v])));
    INFO("length " << cached.length() << " on " << dev.str());
    CHECK(worst < 1e-4);
  }
  CHECK(cached.length() == 3 + 10 + 4 + 6);
  CHECK(cached.cached() == model->config().block_size);
}

}  // namespace

TEST_CASE("generate: greedy decoding equals PyTorch's, with and without the KV cache", "[gpt2][generate]") {
  greedy_matches_pytorch(kCPU);
}

TEST_CASE("generate (emu): greedy decoding equals PyTorch's, with and without the KV cache", "[gpt2][generate][emu]") {
  greedy_matches_pytorch(Device{DeviceType::emu, 0});
}

TEST_CASE("generate: the KV cache's logits equal the full window's at every step", "[gpt2][generate]") {
  cache_equals_window(kCPU);
}

TEST_CASE("generate (emu): the KV cache's logits equal the full window's at every step", "[gpt2][generate][emu]") {
  cache_equals_window(Device{DeviceType::emu, 0});
}

TEST_CASE("sample: top-k and top-p draw only what they allow, in proportion", "[gpt2][generate]") {
  // Ten logits; probabilities at temperature 1 proportional to exp(logit).
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 0.5f, 3.0f, -2.0f, 1.0f, 0.0f, 2.5f};
  std::vector<double> p(logits.size());
  auto probs = [&](const std::vector<int>& allowed) {
    double z = 0;
    for (int i : allowed) z += std::exp(double(logits[size_t(i)]));
    std::map<int, double> out;
    for (int i : allowed) out[i] = std::exp(double(logits[size_t(i)])) / z;
    return out;
  };
  struct Case {
    SampleOptions o;
    std::vector<int> allowed;  // by hand from the logits' order 5, 9, 1, 3, 7, 4, 0, 8, 2, 6
  };
  // top_p 0.7: 5 (0.38), 9 (0.23) make 0.61 < 0.7, with 1 (0.14) 0.75 >= 0.7.
  const std::vector<Case> cases = {{{1.0, 3, 1.0, 11}, {5, 9, 1}},
                                   {{1.0, 0, 0.7, 12}, {5, 9, 1}},
                                   {{1.0, 5, 0.5, 13}, {5, 9}},
                                   {{1.0, 0, 1.0, 14}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}};
  const int n = 20000;
  for (const Case& c : cases) {
    std::map<int, int> count;
    for (int k = 0; k < n; ++k) ++count[pick_token(logits.data(), 10, c.o, uint64_t(k))];
    const auto want = probs(c.allowed);
    INFO("top_k " << c.o.top_k << ", top_p " << c.o.top_p);
    for (const auto& [tok, m] : count) {
      INFO("token " << tok << " drawn " << m << " times");
      REQUIRE(want.count(tok));
      const double q = want.at(tok), sd = std::sqrt(n * q * (1 - q));
      CHECK(std::abs(m - n * q) < 5 * sd + 1);
    }
  }
  CHECK(pick_token(logits.data(), 10, {0.0, 0, 1.0, 1}, 0) == 5);     // greedy
  CHECK(pick_token(logits.data(), 10, {1e-300, 0, 1.0, 1}, 0) == 5);  // a tiny temperature: no inf - inf
}
