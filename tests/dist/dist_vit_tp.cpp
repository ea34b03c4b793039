// The ViT split over tp (models/vit/vit_tp.h, the whole world as the tp
// group: tp = 1..4) against the serial ViT built from the same seed, both
// heads (classify, dense), with and without sequence parallelism: the same
// weights at init (gathered, exact), the same loss, and every parameter's
// gathered gradient within fp32 tolerance (1e-5 abs + 1e-4 rel, as GPT-2's:
// the sums over tp only reorder additions); the replicated parameters'
// gradients bit-identical on every tp rank. A full state loads into the
// shards; heads that do not divide by tp are refused.
#include <catch2/catch.hpp>

#include "dist_util.h"
#include "models/vit/vit.h"
#include "models/vit/vit_tp.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using namespace eng::models;

namespace {

// 6 x 8 images, patch 2: 12 tokens, so B N = 24 rows divide by 1..4; 12 heads of 2.
ViTConfig tiny(ViTHead head) {
  ViTConfig c;
  c.in_channels = 2, c.img_h = 6, c.img_w = 8, c.patch = 2;
  c.embed = 24, c.depth = 2, c.heads = 12;
  c.head = head, c.classes = 5, c.out_channels = 3;
  return c;
}

Tensor images(int64_t B, const ViTConfig& c, Device dev) {
  std::vector<float> v(size_t(B * c.in_channels * c.img_h * c.img_w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 37 % 19) - 9) / 7.f;
  return Tensor::from_vector(v, {B, c.in_channels, c.img_h, c.img_w}, DType::f32, dev);
}

Tensor targets(int64_t B, const ViTConfig& c, Device dev) {
  if (c.head == ViTHead::classify) {
    std::vector<int32_t> y(static_cast<size_t>(B));
    for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 3 + 1) % size_t(c.classes));
    return Tensor::from_ints(y, {B}, dev);
  }
  std::vector<float> v(size_t(B * c.out_channels * c.img_h * c.img_w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 11 % 13) - 6) / 5.f;
  return Tensor::from_vector(v, {B, c.out_channels, c.img_h, c.img_w}, DType::f32, dev);
}

}  // namespace

TEST_CASE("vit under tp equals the serial model: loss and every gathered gradient", "[dist][tp]") {
  const Group world = Group::world_group();
  const int64_t B = 2;
  for (const auto& s : dist_test::setups())
    for (ViTHead hd : {ViTHead::classify, ViTHead::dense})
      for (bool sp : {false, true}) {
        if (s.dev.type != DeviceType::cpu && hd == ViTHead::classify && !sp) continue;  // emu: three of four
        INFO(s.name() << (hd == ViTHead::dense ? " dense" : " classify") << (sp ? " sequence parallel" : ""));
        const ViTConfig cfg = tiny(hd);
        auto tp = make_communicator(world, s.dev, s.backend);
        ViT serial(cfg, 3, s.dev);
        ViTTp model(cfg, 3, s.dev, *tp, ViTTpOptions{sp});
        const auto full = model.full_state();
        const auto ref = serial.named_parameters();
        REQUIRE(full.size() == ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          INFO(ref[i].first << " at init");
          CHECK(full[i].first == ref[i].first);
          CHECK(full[i].second.to(kCPU).to_vector() == ref[i].second.to(kCPU).to_vector());  // same draws, exact
        }
        const Tensor x = images(B, cfg, s.dev), y = targets(B, cfg, s.dev);
        Tensor ls = serial.loss(x, y);
        ls.backward();
        Tensor l = model.loss(x, y);
        l.backward();
        model.sync_partial_grads();
        INFO("loss " << l.item() << " vs serial " << ls.item());
        CHECK_CLOSE(test::values(l.to(kCPU)), test::values(ls.to(kCPU)), 1e-5, 1e-5);
        const auto params = model.named_parameters();
        for (size_t i = 0; i < ref.size(); ++i) {
          INFO(ref[i].first << " gradient");
          const Tensor g = model.unshard(params[i].first, params[i].second.grad());
          CHECK_CLOSE(test::values(g.to(kCPU)), test::values(ref[i].second.grad().to(kCPU)), 1e-5, 1e-4);
        }
        for (const Tensor& p : model.replicated_parameters()) CHECK(dist_test::same_on_every_rank(p.grad(), *tp));
        // The forward's output is whole and the same on every rank.
        CHECK(dist_test::same_on_every_rank(model.forward(x), *tp));
      }
}

TEST_CASE("vit under tp: a full state loads into the shards; bad shapes are refused", "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size();
  auto tp = make_communicator(world, kCPU, Backend::mpi);
  const ViTConfig cfg = tiny(ViTHead::dense);
  ViT other(cfg, 8, kCPU);
  ViTTp model(cfg, 3, kCPU, *tp);
  model.load_full_state(other.named_parameters());
  const auto got = model.full_state();
  const auto want = other.named_parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(got[i].second.to_vector() == want[i].second.to_vector());
  }
  if (P > 1) {
    ViTConfig bad = cfg;
    bad.heads = 4 * P + 1, bad.embed = 4 * P + 1;
    CHECK_THROWS_WITH(ViTTp(bad, 1, kCPU, *tp), Catch::Contains("n_head " + std::to_string(4 * P + 1) +
                                                                " does not divide by tp " + std::to_string(P)));
    ViTTp sp(cfg, 3, kCPU, *tp, ViTTpOptions{true});
    // B N = 1 x 12 rows: divide by 2, 3 and 4; 5 images of 12 do not divide by 8 or any P not dividing 60.
    if (60 % P != 0) CHECK_THROWS_WITH(sp.forward(images(5, cfg, kCPU)), Catch::Contains("do not divide by tp"));
  }
}
