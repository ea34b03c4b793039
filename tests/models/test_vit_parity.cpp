// ViT parity with PyTorch, both heads. tests/fixtures/vit_tiny.safetensors
// (scripts/fixtures_vit.py) holds, under "classify." and "dense.", a tiny ViT
// in the engine's parameter names (in_channels 2 / 3, images 12x8 / 8x12,
// patch 4, embed 12, 3 / 2 heads, depth 2: odd sizes and h != w, so a
// transposed matrix or swapped patch grid cannot have the right shape by
// accident), its inputs, and torch's output, loss and every gradient. The
// references come from a float64 torch model written out op by op, never from
// the engine. Each test builds models::ViT from the fixture's config on the
// cpu, copies the weights in by name, and compares.
#include <memory>
#include <set>
#include <string>

#include "models/vit/vit.h"
#include "tests/parity_util.h"

using namespace eng;
using namespace eng::test;

namespace {

// Tolerances (|x - ref| <= atol + rtol |ref|), against a float64 reference
// rounded once to float32. The engine runs ~25 float32 ops deep (two blocks of
// layernorm, GEMMs over K <= 48, softmax, GELU, a final layernorm); each rounds
// at ~6e-8 relative and layernorm's 1/std amplifies that. Measured when this
// test was written, max over both heads:
// Outputs are O(1) (max 1.9): error 8.9e-7. 1e-5 + 1e-4 |ref| is the parity
// suite's default, ~10x over that.
constexpr double kOutAtol = kAtol, kOutRtol = kRtol;
// The losses (1.86, 1.36) came out equal to the rounded reference; 1e-6
// relative is ~10 float32 ulps.
constexpr double kLossRtol = 1e-6;
// Gradient elements average 3e-3 to 0.17 per tensor: error 1.0e-7. 2e-6 is
// ~20x that and under 1e-3 of the smallest tensor's typical element, so a
// transposed or mis-routed gradient (wrong by the elements' own size) cannot
// pass. The atol also covers references that are zero up to rounding (the key
// third of qkv.bias: softmax ignores a per-row shift of the scores).
constexpr double kGradAtol = 2e-6, kGradRtol = 1e-4;

// Fixture tensors that are inputs or references, not weights (besides "grad.<name>").
const std::set<std::string> kNotWeights{"images", "targets", "out", "loss"};

models::ViTConfig fixture_config(const SafetensorsFile& f, const std::string& head) {
  auto get = [&](const std::string& field) { return std::stoll(f.metadata.at(head + "." + field)); };
  models::ViTConfig c;
  c.head = head == "classify" ? models::ViTHead::classify : models::ViTHead::dense;
  c.in_channels = get("in_channels"), c.img_h = get("img_h"), c.img_w = get("img_w"), c.patch = get("patch");
  c.embed = get("embed"), c.depth = get("depth"), c.heads = get("heads"), c.mlp_ratio = get("mlp_ratio");
  if (c.head == models::ViTHead::classify)
    c.classes = get("classes");
  else
    c.out_channels = get("out_channels");
  return c;
}

// Copies the fixture's weights under `prefix` into the model's parameters by
// name. Fails on a parameter the fixture lacks, a shape mismatch, or a fixture
// weight that is no parameter of the model.
void load_weights(const SafetensorsFile& f, const std::string& prefix, Module& m) {
  std::set<std::string> names;
  for (auto& [name, p] : m.named_parameters()) {
    names.insert(name);
    if (!f.has(prefix + name)) FAIL("parameter " << name << " has no tensor " << prefix << name << " in " << f.path);
    const Tensor& t = f.get(prefix + name);
    if (t.shape() != p.shape())
      FAIL("parameter " << name << " is " << p.desc() << " but the fixture's " << prefix << name << " is " << t.desc());
    p.copy_from(t);
  }
  for (const auto& [name, t] : f.tensors) {
    if (!name.starts_with(prefix)) continue;
    const std::string rest = name.substr(prefix.size());
    if (kNotWeights.count(rest) || rest.starts_with("grad.")) continue;
    if (!names.count(rest)) FAIL("fixture weight " << name << " in " << f.path << " is no parameter of the model");
  }
}

void check_head(const std::string& head) {
  const SafetensorsFile f = load_fixture("vit_tiny.safetensors");
  const std::string pre = head + ".";
  const models::ViTConfig c = fixture_config(f, head);
  models::ViT model(c, 1);
  load_weights(f, pre, model);
  const Tensor images = f.get(pre + "images"), targets = f.get(pre + "targets");
  REQUIRE(images.shape() == Shape{images.size(0), c.in_channels, c.img_h, c.img_w});

  check_close("output", model.forward(images), f.get(pre + "out"), kOutAtol, kOutRtol);
  Tensor loss = model.loss(images, targets);
  check_close("loss", loss, f.get(pre + "loss"), 0.0, kLossRtol);

  model.zero_grad();
  loss.backward();
  int checked = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    REQUIRE(f.has(pre + "grad." + name));
    check_close("gradient of " + name, p.grad(), f.get(pre + "grad." + name), kGradAtol, kGradRtol);
    ++checked;
  }
  // Every gradient the fixture holds for this head was compared.
  int in_fixture = 0;
  for (const auto& [name, t] : f.tensors) in_fixture += name.starts_with(pre + "grad.");
  CHECK(checked == in_fixture);
  CHECK(checked == 3 + 12 * c.depth + 4);
}

}  // namespace

TEST_CASE("vit parity: classify head's logits, loss and every gradient match PyTorch", "[vit][parity]") {
  check_head("classify");
}

TEST_CASE("vit parity: dense head's field, loss and every gradient match PyTorch", "[vit][parity]") {
  check_head("dense");
}
