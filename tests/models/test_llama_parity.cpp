// Llama parity with Hugging Face's LlamaForCausalLM, and its file layout.
// tests/fixtures/llama/{tiny,llama3}/ (scripts/fixtures_llama.py) are two
// small random models that transformers itself wrote (model.safetensors and
// config.json; tiny: untied head, 4 heads on 2 K/V heads; llama3: tied,
// multi-query, Llama 3's rope scaling), with transformers' logits, loss and
// every gradient in float64, and the losses and clip norms of 5 AdamW steps.
// The references come from transformers, never from the engine.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "engine/optim/optimizer.h"
#include "io/safetensors.h"
#include "models/llama/llama.h"
#include "models/llama/llama_io.h"
#include "tests/kernels/emu_check.h"
#include "tests/parity_util.h"

using namespace eng;
using namespace eng::models;
using namespace eng::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Tolerances against a float64 reference rounded once to float32 (the
// engine: ~30 float32 ops deep, two blocks). Logits are O(1): 1e-5 as the
// issue asks, in absolute and relative terms. Gradients: an atol for the
// references near zero (1e-4 of a typical element, so a mis-routed gradient,
// wrong by its own size, cannot pass). AdamW: the trajectory of float32
// steps against float64 ones, as the GPT-2 parity test's.
constexpr double kLogitTol = 1e-5, kLossRtol = 1e-6, kGradAtol = 2e-6, kGradRtol = 1e-4, kTrajRtol = 5e-6;

bool bitwise_equal(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && values(a) == values(b); }

std::string fixture_dir(const std::string& name) { return std::string(ENGINE_FIXTURE_DIR) + "/llama/" + name; }

struct Loaded {
  std::unique_ptr<Llama> model;
  SafetensorsFile ref;
};
Loaded load(const std::string& name, Device dev = kCPU) {
  const std::string dir = fixture_dir(name);
  auto m = std::make_unique<Llama>(llama_config_from_hf(dir), 7, dev);
  load_llama_weights(dir, *m);
  return {std::move(m), load_safetensors(dir + "/reference.safetensors")};
}

void check_forward_backward(const std::string& name, Device dev) {
  INFO(name << " on " << dev.str());
  Loaded l = load(name, dev);
  const Tensor ids = l.ref.get("ids").to(dev), targets = l.ref.get("targets").to(dev);
  check_close("logits", l.model->forward(ids).to(kCPU), l.ref.get("logits"), kLogitTol, kLogitTol);
  Tensor loss = l.model->loss(ids, targets);
  check_close("loss", loss.to(kCPU), l.ref.get("loss"), 0.0, kLossRtol);
  loss.backward();
  std::vector<std::pair<std::string, Tensor>> grads;
  for (const auto& [n, p] : l.model->named_parameters()) grads.emplace_back(n, p.grad());
  int checked = 0;
  for (const auto& [n, g] : llama_hf_split(l.model->config(), grads)) {
    REQUIRE(l.ref.has("grad." + n));
    check_close("gradient of " + n, g, l.ref.get("grad." + n), kGradAtol, kGradRtol);
    ++checked;
  }
  int in_fixture = 0;
  for (const auto& [n, t] : l.ref.tensors) in_fixture += n.starts_with("grad.");
  CHECK(checked == in_fixture);
}

}  // namespace

TEST_CASE("llama parity: logits, loss and every gradient match transformers' LlamaForCausalLM", "[llama][parity]") {
  for (const char* name : {"tiny", "llama3"}) check_forward_backward(name, kCPU);
}

TEST_CASE("emu llama parity: the same on the emulated CUDA kernels (fp32)", "[llama][parity][emu]") {
  for (const char* name : {"tiny", "llama3"}) check_forward_backward(name, kEmu);
}

TEST_CASE("emu llama at O2 (bf16, tensor-core attention): loss and gradients near the cpu's fp32",
          "[llama][parity][emu]") {
  // Head size 8 runs the CUDA-core attention; a model of head size 64
  // (n_embd 128, 2 heads on 1 K/V head) runs the tensor-core kernels. bf16
  // storage through two blocks: the loss within 1%, each gradient's norm of
  // error within 5% of its norm (a mis-routed gradient is off by ~100%).
  LlamaConfig c = llama_config_from_hf(fixture_dir("tiny"));
  c.n_embd = 128, c.n_head = 2, c.n_kv_head = 1, c.ffn_hidden = 96;
  Llama ref(c, 5, kCPU), emu(c, 5, kEmu);
  {
    NoGradGuard ng;
    const auto src = ref.named_parameters(), dst = emu.named_parameters();
    for (size_t i = 0; i < src.size(); ++i) {
      Tensor d = dst[i].second;
      d.copy_from(src[i].second.to(kEmu));
    }
  }
  const Tensor ids = random_ids(2, 24, c.vocab_size, 3), targets = random_ids(2, 24, c.vocab_size, 4);
  Tensor lr = ref.loss(ids, targets);
  lr.backward();
  const Autocast o2(Precision::O2);
  Tensor le = emu.loss(ids.to(kEmu), targets.to(kEmu), Recompute::no, o2);
  le.backward();
  CHECK(std::fabs(le.item() - lr.item()) <= 0.01 * lr.item());
  const auto pr = ref.named_parameters(), pe = emu.named_parameters();
  for (size_t i = 0; i < pr.size(); ++i) {
    INFO(pr[i].first);
    const std::vector<double> a = values(pe[i].second.grad().to(kCPU)), b = values(pr[i].second.grad());
    double err = 0, norm = 0;
    for (size_t k = 0; k < a.size(); ++k) err += (a[k] - b[k]) * (a[k] - b[k]), norm += b[k] * b[k];
    CHECK(std::sqrt(err) <= 0.05 * std::sqrt(norm));
  }
}

TEST_CASE("emu llama: the vocabulary padded for the head's GEMMs changes no logit (O2), tied and untied",
          "[llama][emu]") {
  for (bool tied : {false, true}) {
    INFO((tied ? "tied" : "untied"));
    LlamaConfig c = llama_config_from_hf(fixture_dir("tiny"));  // 61 tokens
    c.tie_embeddings = tied;
    LlamaConfig plain = c;
    plain.pad_vocab_to = 1;
    const Llama padded(c, 3, kEmu), unpadded(plain, 3, kEmu);
    const Autocast o2(Precision::O2);
    REQUIRE(padded.head_width(o2, kEmu) == 64);
    CHECK(padded.head_width(Autocast(), kEmu) == 61);
    CHECK(padded.head_width(o2, kCPU) == 61);
    const Tensor ids = random_ids(2, 9, c.vocab_size, 1, kEmu), targets = random_ids(2, 9, c.vocab_size, 2, kEmu);
    const NoGradGuard ng;
    const Tensor wide = padded.forward_padded(ids, Recompute::no, o2);
    REQUIRE(wide.shape() == Shape{18, 64});
    CHECK(values(padded.forward(ids, Recompute::no, o2).to(kCPU)) ==
          values(unpadded.forward(ids, Recompute::no, o2).to(kCPU)));
    const std::vector<double> w = values(wide.to(kCPU).to(DType::f32));
    for (int64_t r = 0; r < 18; ++r)
      for (int64_t v = 61; v < 64; ++v) CHECK(w[size_t(r * 64 + v)] == 0.0);
    CHECK(std::fabs(padded.loss(ids, targets, Recompute::no, o2).item() -
                    unpadded.loss(ids, targets, Recompute::no, o2).item()) < 1e-6);
  }
}

TEST_CASE("llama parity: 5 AdamW steps with clip_grad_norm match transformers' losses and norms", "[llama][parity]") {
  for (const char* name : {"tiny", "llama3"}) {
    INFO(name);
    Loaded l = load(name);
    const Tensor ids = l.ref.get("ids"), targets = l.ref.get("targets");
    const std::vector<Tensor> params = l.model->parameters();
    AdamW opt(decay_groups(params, 0.1), 1e-2, 0.9, 0.95, 1e-8);
    std::vector<double> losses, norms;
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      Tensor loss = l.model->loss(ids, targets);
      losses.push_back(loss.item());
      loss.backward();
      norms.push_back(clip_grad_norm(params, 1.0));
      opt.step();
    }
    {
      NoGradGuard ng;
      losses.push_back(l.model->loss(ids, targets).item());
    }
    CHECK_CLOSE(losses, values(l.ref.get("adamw.losses")), 0.0, kTrajRtol);
    CHECK_CLOSE(norms, values(l.ref.get("adamw.norms")), 0.0, kTrajRtol);
  }
}

TEST_CASE("llama io: the export is the file transformers wrote, tensor for tensor, and its config's shape",
          "[llama][io]") {
  for (const char* name : {"tiny", "llama3"}) {
    INFO(name);
    Loaded l = load(name);
    const std::string dir = fixture_dir(name);
    const SafetensorsFile hf = load_safetensors(dir + "/model.safetensors");
    const auto ours = llama_hf_tensors(*l.model);
    std::set<std::string> names;
    for (const auto& [n, t] : ours) {
      names.insert(n);
      REQUIRE(hf.has(n));
      CHECK(bitwise_equal(t, hf.get(n)));
    }
    for (const auto& [n, t] : hf.tensors) CHECK(names.count(n) == 1);  // nothing transformers wrote is left out
    nlohmann::json theirs;
    std::ifstream(dir + "/config.json") >> theirs;
    const nlohmann::json mine = llama_hf_config(l.model->config());
    for (const char* k : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
                          "rope_scaling", "tie_word_embeddings", "model_type", "architectures"}) {
      INFO(k);
      CHECK(mine[k] == theirs[k]);
    }
  }
}

TEST_CASE("llama io: bad files and configs are one line naming the file and the key", "[llama][io]") {
  const fs::path tmp = fs::temp_directory_path() / ("llama_io_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  auto write = [&](const std::string& text) {
    std::ofstream(tmp / "config.json") << text;
    return (tmp / "config.json").string();
  };
  CHECK_THROWS_WITH(llama_config_from_hf(write("{\"model_type\": \"llama\", \"vocab_size\": 10}")),
                    Contains("config.json") && Contains("missing integer 'hidden_size'"));
  nlohmann::json j;
  std::ifstream(fixture_dir("llama3") + "/config.json") >> j;
  j["rope_scaling"]["rope_type"] = "yarn";
  CHECK_THROWS_WITH(llama_config_from_hf(write(j.dump())), Contains("rope_scaling type 'yarn'"));
  j["rope_scaling"]["rope_type"] = "llama3";
  j["rope_scaling"].erase("factor");  // transformers requires it: no silent scaling off
  CHECK_THROWS_WITH(llama_config_from_hf(write(j.dump())), Contains("'rope_scaling.factor' is not a number"));
  nlohmann::json k = j;
  k["tie_word_embeddings"] = "yes";
  CHECK_THROWS_WITH(llama_config_from_hf(write(k.dump())), Contains("'tie_word_embeddings' is not true or false"));
  k = j;
  k["rms_norm_eps"] = "small";
  CHECK_THROWS_WITH(llama_config_from_hf(write(k.dump())), Contains("'rms_norm_eps' is not a number"));
  j["rope_scaling"] = nullptr;
  j["num_key_value_heads"] = 3;
  CHECK_THROWS_WITH(llama_config_from_hf(write(j.dump())), Contains("n_kv_head (3) must divide n_head (4)"));
  // A file of the wrong shape: the tensor and both shapes named.
  LlamaConfig c = llama_config_from_hf(fixture_dir("tiny"));
  c.ffn_hidden = 44;
  Llama wrong(c, 1);
  CHECK_THROWS_WITH(load_llama_weights(fixture_dir("tiny"), wrong),
                    Contains("mlp.gate_proj.weight' has shape (40, 24), the model needs (44, 24)"));
  fs::remove_all(tmp);
}
