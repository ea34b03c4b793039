// ViT checkpoint weights (models/vit/vit_io.h) and the FLOP count the train
// program's MFU uses (vit_flops_per_image).
#include <algorithm>
#include <filesystem>

#include "io/safetensors.h"
#include "models/vit/vit.h"
#include "models/vit/vit_io.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;

namespace {
ViTConfig small(ViTHead head) {
  ViTConfig c;
  c.in_channels = 2, c.img_h = 8, c.img_w = 12, c.patch = 4, c.embed = 16, c.depth = 2, c.heads = 2;
  c.head = head, c.classes = 5, c.out_channels = 3;
  return c;
}
std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("engine_test_vit_io_" + name)).string();
}
}  // namespace

TEST_CASE("vit io: weights saved and loaded give the same model; timm's shapes load too", "[vit][io]") {
  for (ViTHead head : {ViTHead::classify, ViTHead::dense}) {
    const ViTConfig c = small(head);
    ViT a(c, 1), b(c, 2);
    const std::string path = tmp_path("w.safetensors");
    save_vit_weights(path, a);
    load_vit_weights(path, b);
    const auto pa = a.named_parameters(), pb = b.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) CHECK(test::values(pa[i].second) == test::values(pb[i].second));

    // timm stores the patch embedding as a conv weight and the positions as
    // the parameter `pos_embed` with a batch dimension.
    std::vector<std::pair<std::string, Tensor>> timm;
    for (auto& [name, p] : a.named_parameters()) {
      Tensor t = p.detach();
      if (name == "patch_embed.proj.weight") t = t.reshape({c.embed, c.in_channels, c.patch, c.patch});
      if (name == "pos_embed.weight")
        timm.emplace_back("pos_embed", t.reshape({1, c.tokens(), c.embed}));
      else
        timm.emplace_back(name, t);
    }
    save_safetensors(path, timm);
    ViT d(c, 3);
    load_vit_weights(path, d);
    const auto pd = d.named_parameters();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(test::values(pa[i].second) == test::values(pd[i].second));
    std::filesystem::remove(path);
  }
}

TEST_CASE("vit io: a missing or mis-shaped tensor is an error naming the file and the tensor", "[vit][io][errors]") {
  const ViTConfig c = small(ViTHead::classify);
  ViT a(c, 1);
  const std::string path = tmp_path("bad.safetensors");
  std::vector<std::pair<std::string, Tensor>> w;
  for (auto& [name, p] : a.named_parameters())
    w.emplace_back(name, name == "head.weight" ? Tensor::zeros({4, c.embed}) : p.detach());
  save_safetensors(path, w);
  CHECK_THROWS_WITH(load_vit_weights(path, a), Catch::Contains(path) && Catch::Contains("head.weight") &&
                                                   Catch::Contains("(4, 16)") && Catch::Contains("(5, 16)"));
  w.erase(std::remove_if(w.begin(), w.end(), [](const auto& kv) { return kv.first == "head.weight"; }), w.end());
  save_safetensors(path, w);
  CHECK_THROWS_WITH(load_vit_weights(path, a), Catch::Contains("missing tensor 'head.weight'"));
  std::filesystem::remove(path);
}

// The count from the model itself: every Linear's weight (out, in) applied
// to every token (the classifier head once per image), plus the two
// attention GEMMs per block (N x N x E each), 2 FLOPs per multiply-add, and
// backward twice forward.
TEST_CASE("vit: FLOPs per image match the GEMMs the model's weights imply", "[vit]") {
  for (ViTHead head : {ViTHead::classify, ViTHead::dense}) {
    const ViTConfig c = small(head);
    const ViT m(c, 1);
    const double N = double(c.tokens());
    double macs = 0;
    for (auto& [name, p] : m.named_parameters()) {
      if (p.ndim() != 2 || name == "pos_embed.weight") continue;  // biases, layernorms; the position table is added
      const double rows = (name == "head.weight" && head == ViTHead::classify) ? 1 : N;
      macs += rows * double(p.size(0)) * double(p.size(1));
    }
    macs += double(c.depth) * 2 * N * N * double(c.embed);
    CHECK(vit_flops_per_image(c) == Approx(6 * macs).epsilon(1e-12));
  }
}
