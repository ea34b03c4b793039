// timm loads the engine's ViT checkpoints as they are. tests/fixtures/vit_timm
// (scripts/fixtures_timm.py) is timm's own: a VisionTransformer built from
// the config.json keys the engine writes, its state_dict() saved by the
// safetensors package, images and timm's logits for them. If the engine's
// config.json equals that config and the engine saves exactly timm's
// tensors (names, shapes, values), timm's strict load_state_dict of an
// engine checkpoint is the load the script did.
#include <filesystem>
#include <fstream>
#include <set>

#include "io/safetensors.h"
#include "models/vit/vit.h"
#include "models/vit/vit_io.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;

namespace {

const std::string kDir = std::string(ENGINE_FIXTURE_DIR) + "/vit_timm/";

// The ViT the fixture's config.json describes.
ViTConfig timm_config() {
  ViTConfig c;
  c.in_channels = 2, c.img_h = 8, c.img_w = 12, c.patch = 4, c.embed = 16, c.depth = 2, c.heads = 2;
  c.mlp_ratio = 4, c.head = ViTHead::classify, c.classes = 5;
  return c;
}

}  // namespace

TEST_CASE("vit timm: config.json is the config timm's model was built from", "[vit][io][timm]") {
  std::ifstream in(kDir + "config.json");
  REQUIRE(in);
  CHECK(vit_config_json(timm_config()) == nlohmann::json::parse(in));
}

TEST_CASE("vit timm: timm's state dict loads, and gives timm's logits", "[vit][io][timm]") {
  const SafetensorsFile f = load_safetensors(kDir + "model.safetensors");
  ViT m(timm_config(), 1);
  CHECK(f.tensors.size() == m.named_parameters().size());  // a strict load: nothing left over
  load_vit_weights(kDir + "model.safetensors", m);
  const SafetensorsFile io = load_safetensors(kDir + "io.safetensors");
  NoGradGuard ng;
  const Tensor logits = m.forward(io.get("images"));
  // timm's logits in float64 from the same float32 weights, rounded once;
  // the engine runs float32 two blocks deep: the parity suite's tolerance.
  const std::string err = test::compare(test::values(logits), test::values(io.get("logits")), 1e-5, 1e-4);
  CHECK(err == "");
}

TEST_CASE("vit timm: the engine saves exactly timm's tensors", "[vit][io][timm]") {
  const SafetensorsFile timm = load_safetensors(kDir + "model.safetensors");
  ViT m(timm_config(), 1);
  load_vit_weights(kDir + "model.safetensors", m);
  const std::string path = (std::filesystem::temp_directory_path() / "engine_test_vit_timm.safetensors").string();
  save_vit_weights(path, m);
  const SafetensorsFile ours = load_safetensors(path);
  std::set<std::string> names;
  for (const auto& [name, t] : ours.tensors) {
    names.insert(name);
    INFO(name);
    REQUIRE(timm.has(name));
    CHECK(t.shape() == timm.get(name).shape());
    CHECK(t.dtype() == timm.get(name).dtype());
    CHECK(test::values(t) == test::values(timm.get(name)));
  }
  CHECK(names.size() == timm.tensors.size());
  std::filesystem::remove(path);
}
