// GPT-2 split over tp (models/gpt2/gpt2_tp.h, the whole world as the tp
// group: tp = 1..4) against the serial GPT-2 built from the same seed, with
// and without sequence parallelism, eager and with activation recompute:
// the same weights at init (gathered), the same loss, and every parameter's
// gathered gradient within fp32 tolerance (1e-5 abs + 1e-4 rel: the tp sums
// and the sharded softmax reorder additions); the replicated parameters'
// gradients bit-identical on every tp rank; a full state loaded back into
// the shards. A config whose n_head does not divide by tp is refused.
#include <catch2/catch.hpp>

#include "dist_util.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_tp.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using namespace eng::models;

namespace {

GPT2Config tiny() {
  GPT2Config c;
  c.vocab_size = 97;  // padded to 128 tp
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 12;  // divides by 1..4
  c.n_embd = 48;
  return c;
}

Tensor tokens(int64_t B, int64_t T, int64_t V, int64_t salt, Device dev) {
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((int64_t(i) * 31 + salt * 7 + 5) % V);
  return Tensor::from_ints(v, {B, T}, dev);
}

}  // namespace

TEST_CASE("gpt2 under tp equals the serial model: loss and every gathered gradient", "[dist][tp]") {
  const Group world = Group::world_group();
  const GPT2Config cfg = tiny();
  const int64_t B = 2, T = 6;  // B T = 12 rows divide by 1..4
  for (const auto& s : dist_test::setups())
    for (bool sp : {false, true})
      for (Recompute rc : {Recompute::no, Recompute::yes}) {
        if (rc == Recompute::yes && (sp || s.dev.type != DeviceType::cpu)) continue;  // once is enough
        INFO(s.name() << (sp ? " sequence parallel" : "") << (rc == Recompute::yes ? " recompute" : ""));
        auto tp = make_communicator(world, s.dev, s.backend);
        GPT2 serial(cfg, 3, s.dev);
        GPT2Tp model(cfg, 3, s.dev, *tp, GPT2TpOptions{sp});
        const auto full = model.full_state();
        const auto ref = serial.named_parameters();
        REQUIRE(full.size() == ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          INFO(ref[i].first << " at init");
          CHECK(full[i].first == ref[i].first);
          CHECK(full[i].second.to(kCPU).to_vector() == ref[i].second.to(kCPU).to_vector());  // same draws, exact
        }
        const Tensor ids = tokens(B, T, cfg.vocab_size, 1, s.dev), tg = tokens(B, T, cfg.vocab_size, 2, s.dev);
        Tensor ls = serial.loss(ids, tg, rc);
        ls.backward();
        Tensor l = model.loss(ids, tg, rc);
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
      }
}

TEST_CASE("gpt2 under tp: a full state loads into the shards; bad shapes are refused", "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size();
  auto tp = make_communicator(world, kCPU, Backend::mpi);
  const GPT2Config cfg = tiny();
  GPT2 other(cfg, 8, kCPU);
  GPT2Tp model(cfg, 3, kCPU, *tp);
  model.load_full_state(other.named_parameters());
  const auto got = model.full_state();
  const auto want = other.named_parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(got[i].second.to_vector() == want[i].second.to_vector());
  }
  if (P > 1) {
    GPT2Config bad = cfg;
    bad.n_head = 4 * P + 1, bad.n_embd = 4 * P + 1;
    CHECK_THROWS_WITH(GPT2Tp(bad, 1, kCPU, *tp), Catch::Contains("n_head " + std::to_string(4 * P + 1) +
                                                                 " does not divide by tp " + std::to_string(P)));
  }
}
