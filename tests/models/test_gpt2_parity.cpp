// GPT-2 parity with PyTorch and interop with Hugging Face's checkpoint layout.
// tests/fixtures/gpt2_tiny.safetensors (scripts/fixtures_gpt2.py) holds a tiny
// GPT-2 (V=37, P=16, L=2, NH=2, C=12: odd sizes, so a transposed or mis-split
// matrix cannot have the right shape by accident) in HF's names and layouts,
// with torch's logits, loss, every gradient, and the losses and clip norms of
// 3 AdamW steps. hf_style.safetensors holds the same weights as
// GPT2LMHeadModel's state dict ("transformer." prefix, lm_head.weight, mask
// buffers), written by Python's safetensors package. The references come from
// a float64 torch model, never from the engine.
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/optim/optimizer.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_io.h"
#include "tests/parity_util.h"

using namespace eng;
using namespace eng::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// Tolerances (|x - ref| <= atol + rtol |ref|), against a float64 reference
// rounded once to float32. The engine runs ~25 float32 ops deep (two blocks
// of layernorm, matmuls over K <= 48, softmax, GELU); each rounds at ~6e-8
// relative and layernorm's 1/std amplifies that, so errors of a few 1e-7 of
// the values' scale are expected. Each constant leaves ~10x over the error
// measured when this test was written.
// Logits are O(1) (max 1.9): measured max error 9e-7.
constexpr double kLogitAtol = 5e-6, kLogitRtol = 1e-5;
// The loss (3.64) is a mean of 14 log-sum-exps: measured relative error 7e-8.
constexpr double kLossRtol = 1e-6;
// Gradients average ~3e-2 per element: measured max error 1.5e-7. An atol is
// needed because some references are exactly zero or nearly so (wpe rows past
// T; the key third of c_attn.bias, whose gradient vanishes since softmax
// ignores a per-row shift of the scores, leaving only rounding noise). 2e-6
// is ~1e-4 of a typical element, so a transposed or mis-routed gradient (wrong
// by the elements' own size) cannot pass.
constexpr double kGradAtol = 2e-6, kGradRtol = 1e-4;
// AdamW trajectory: the engine steps in float32, the reference in float64.
// Measured relative error: losses 5e-8, norms 2e-7. In the reference, weight
// decay 0 instead of 0.1 moves the loss after step 1 by 7e-5 relative, beta2
// 0.999 instead of 0.95 moves the loss after step 2 by 3e-4, and dropping the
// clip changes the later norms and losses by 3e-4 and more, so 2e-6 separates
// float32 noise from every such bug.
constexpr double kTrajRtol = 2e-6;

constexpr int kParams = 4 + 12 * 2;  // wte, wpe, ln_f (2), and 12 per block

std::string fixture_path(const std::string& file) { return std::string(ENGINE_FIXTURE_DIR) + "/" + file; }

models::GPT2Config tiny_config(const SafetensorsFile& f) {
  models::GPT2Config c;
  c.vocab_size = std::stoll(f.metadata.at("vocab_size"));
  c.block_size = std::stoll(f.metadata.at("block_size"));
  c.n_layer = std::stoll(f.metadata.at("n_layer"));
  c.n_head = std::stoll(f.metadata.at("n_head"));
  c.n_embd = std::stoll(f.metadata.at("n_embd"));
  return c;
}

// A model with seeded random weights, then the given file's weights loaded over them.
std::unique_ptr<models::GPT2> load_model(const SafetensorsFile& cfg, const std::string& weights_file,
                                         uint64_t seed = 1) {
  auto m = std::make_unique<models::GPT2>(tiny_config(cfg), seed);
  models::load_gpt2_weights(fixture_path(weights_file), *m);
  return m;
}

// A fixture tensor in the engine's layout: Conv1D matrices (in, out) -> (out, in).
Tensor engine_layout(const std::string& name, const Tensor& t) {
  return models::gpt2_is_conv1d_weight(name) ? transpose(t, 0, 1) : t;
}

// The fixture's weight tensors (HF names), i.e. everything that is not a reference output.
std::vector<std::pair<std::string, Tensor>> fixture_weights(const SafetensorsFile& f) {
  static const std::set<std::string> outputs{"ids", "targets", "logits", "loss", "adamw.losses", "adamw.norms"};
  std::vector<std::pair<std::string, Tensor>> w;
  for (const auto& [name, t] : f.tensors)
    if (!outputs.count(name) && !name.starts_with("grad.")) w.emplace_back(name, t);
  return w;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) { return a.shape() == b.shape() && values(a) == values(b); }

// A scratch directory per process (ctest runs test cases as parallel processes), removed afterwards.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag)
      : path(fs::temp_directory_path() / cat("engine_test_gpt2_", tag, "_", ::getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_CASE("gpt2 parity: logits, loss and every parameter's gradient match PyTorch", "[gpt2][parity]") {
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  auto model = load_model(f, "gpt2_tiny.safetensors");
  const Tensor ids = f.get("ids"), targets = f.get("targets");
  REQUIRE(ids.shape() == Shape{2, 7});

  // The load itself: every parameter is the fixture's tensor, Conv1D ones transposed.
  const auto params = model->named_parameters();
  REQUIRE(params.size() == size_t(kParams));
  for (const auto& [name, p] : params) {
    INFO(name);
    CHECK(bitwise_equal(p, engine_layout(name, f.get(name))));
  }

  check_close("logits", model->forward(ids), f.get("logits"), kLogitAtol, kLogitRtol);
  Tensor loss = model->loss(ids, targets);
  check_close("loss", loss, f.get("loss"), 0.0, kLossRtol);

  model->zero_grad();
  loss.backward();
  int checked = 0;
  for (const auto& [name, p] : params) {
    REQUIRE(f.has("grad." + name));
    check_close("gradient of " + name, p.grad(), engine_layout(name, f.get("grad." + name)), kGradAtol, kGradRtol);
    ++checked;
  }
  // Every gradient in the fixture was compared (none is left over unchecked).
  int in_fixture = 0;
  for (const auto& [name, t] : f.tensors) in_fixture += name.starts_with("grad.");
  CHECK(checked == in_fixture);
}

TEST_CASE("gpt2 parity: 3 AdamW steps with clip_grad_norm match PyTorch's losses and norms", "[gpt2][parity]") {
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  auto model = load_model(f, "gpt2_tiny.safetensors");
  const Tensor ids = f.get("ids"), targets = f.get("targets");
  const std::vector<Tensor> params = model->parameters();
  AdamW opt(decay_groups(params, 0.1), 1e-2, 0.9, 0.95, 1e-8);
  std::vector<double> losses, norms;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss = model->loss(ids, targets);
    losses.push_back(loss.item());
    loss.backward();
    norms.push_back(clip_grad_norm(params, 1.0));
    opt.step();
  }
  {
    NoGradGuard ng;
    losses.push_back(model->loss(ids, targets).item());
  }
  const std::vector<double> ref_norms = values(f.get("adamw.norms"));
  // Every step clips (norms > 1), so the clip coefficient is exercised each time.
  for (double n : ref_norms) CHECK(n > 1.0);
  CHECK_CLOSE(losses, values(f.get("adamw.losses")), 0.0, kTrajRtol);
  CHECK_CLOSE(norms, ref_norms, 0.0, kTrajRtol);
}

TEST_CASE("gpt2 io: a GPT2LMHeadModel-style file (prefix, lm_head, mask buffers) loads the same weights",
          "[gpt2][io]") {
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  // The file really has what the loader must cope with, so this test cannot pass vacuously.
  const SafetensorsFile hf = load_fixture("hf_style.safetensors");
  CHECK(hf.metadata.at("format") == "pt");
  CHECK(hf.has("lm_head.weight"));
  CHECK(hf.has("transformer.h.0.attn.bias"));
  CHECK(hf.has("transformer.h.0.attn.c_attn.weight"));
  CHECK_FALSE(hf.has("h.0.attn.c_attn.weight"));

  auto plain = load_model(f, "gpt2_tiny.safetensors", 1);
  auto prefixed = load_model(f, "hf_style.safetensors", 2);  // another seed: nothing survives by accident
  const auto a = plain->named_parameters(), b = prefixed->named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(bitwise_equal(a[i].second, b[i].second));
  }
}

TEST_CASE("gpt2 io: save_gpt2_weights writes HF names and shapes and round-trips bitwise", "[gpt2][io]") {
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  const models::GPT2Config c = tiny_config(f);
  auto model = load_model(f, "gpt2_tiny.safetensors");
  TempDir dir("roundtrip");
  const std::string path = dir.file("model.safetensors");
  models::save_gpt2_weights(path, *model);

  // The saved file is the fixture's weights under the same names, shapes and bits.
  const SafetensorsFile saved = load_safetensors(path);
  CHECK(saved.metadata.at("format") == "pt");
  const auto want = fixture_weights(f);
  REQUIRE(want.size() == size_t(kParams));
  CHECK(saved.tensors.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(saved.has(name));
    CHECK(saved.get(name).dtype() == DType::f32);
    CHECK(bitwise_equal(saved.get(name), t));
  }
  CHECK(saved.get("h.0.attn.c_attn.weight").shape() == Shape{c.n_embd, 3 * c.n_embd});  // Conv1D (in, out)
  CHECK(saved.get("h.1.mlp.c_proj.weight").shape() == Shape{4 * c.n_embd, c.n_embd});

  auto reloaded = std::make_unique<models::GPT2>(c, 7);
  models::load_gpt2_weights(path, *reloaded);
  const auto a = model->named_parameters(), b = reloaded->named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(bitwise_equal(a[i].second, b[i].second));
  }
}

TEST_CASE("gpt2 io: a missing or mis-shaped tensor is an error naming the file and the tensor", "[gpt2][io]") {
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  const auto weights = fixture_weights(f);
  TempDir dir("bad");
  models::GPT2 model(tiny_config(f), 1);

  SECTION("missing h.1.ln_2.bias") {
    std::vector<std::pair<std::string, Tensor>> w;
    for (const auto& [name, t] : weights)
      if (name != "h.1.ln_2.bias") w.emplace_back(name, t);
    REQUIRE(w.size() + 1 == weights.size());
    const std::string path = dir.file("missing.safetensors");
    save_safetensors(path, w);
    CHECK_THROWS_AS(models::load_gpt2_weights(path, model), Error);
    CHECK_THROWS_WITH(models::load_gpt2_weights(path, model), Contains(path) && Contains("h.1.ln_2.bias"));
  }
  SECTION("Conv1D weight stored in the engine's (out, in) layout instead of HF's (in, out)") {
    std::vector<std::pair<std::string, Tensor>> w = weights;
    for (auto& [name, t] : w)
      if (name == "h.0.mlp.c_fc.weight") t = transpose(t, 0, 1);  // (48, 12) where HF has (12, 48)
    const std::string path = dir.file("transposed.safetensors");
    save_safetensors(path, w);
    CHECK_THROWS_AS(models::load_gpt2_weights(path, model), Error);
    CHECK_THROWS_WITH(models::load_gpt2_weights(path, model),
                      Contains(path) && Contains("h.0.mlp.c_fc.weight") && Contains("(48, 12)"));
  }
  SECTION("position table for a shorter block_size") {
    std::vector<std::pair<std::string, Tensor>> w = weights;
    for (auto& [name, t] : w)
      if (name == "wpe.weight") t = Tensor::zeros({8, 12});
    const std::string path = dir.file("short_wpe.safetensors");
    save_safetensors(path, w);
    CHECK_THROWS_AS(models::load_gpt2_weights(path, model), Error);
    CHECK_THROWS_WITH(models::load_gpt2_weights(path, model),
                      Contains(path) && Contains("wpe.weight") && Contains("(8, 12)") && Contains("(16, 12)"));
  }
}

TEST_CASE("gpt2 io: a truncated weights file is an error naming the file", "[gpt2][io]") {
  std::string bytes;
  {
    std::ifstream in(fixture_path("gpt2_tiny.safetensors"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(bytes.size() > 1000);
  const SafetensorsFile f = load_fixture("gpt2_tiny.safetensors");
  models::GPT2 model(tiny_config(f), 1);
  TempDir dir("truncated");
  // Cut inside the tensor data (the header promises more bytes than exist),
  // then inside the JSON header itself.
  for (size_t keep : {bytes.size() - 100, size_t(50)}) {
    INFO("kept " << keep << " of " << bytes.size() << " bytes");
    const std::string path = dir.file(cat("cut_", keep, ".safetensors"));
    {
      std::ofstream out(path, std::ios::binary);
      out.write(bytes.data(), std::streamsize(keep));
    }
    CHECK_THROWS_AS(models::load_gpt2_weights(path, model), Error);
    CHECK_THROWS_WITH(models::load_gpt2_weights(path, model), Contains(path) && Contains("truncated"));
  }
}
