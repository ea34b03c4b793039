// GPT-2 and the ViT under context parallelism against their serial models
// built from the same seed: the whole world as the cp group (np 1..4, a tp
// group of one), and at np 4 a tp 2 x cp 2 grid. Each cp rank feeds its
// slice of the sequence (GPT-2: positions of the ids and targets; the ViT:
// its tokens of the images); the mean over cp of the ranks' losses is the
// serial loss, and the mean over cp of their parameter gradients (gathered
// over tp) is the serial gradient (1e-5 abs + 1e-4 rel, as the tp tests:
// the sums over ranks reorder additions). The ViT's forward gives the whole
// output on every rank. Causal GPT-2 checks each slice's offset in the mask
// and the positions; the non-causal ViT both heads.
#include <catch2/catch.hpp>

#include "comm/cp_mappings.h"
#include "comm/grid.h"
#include "dist_util.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_tp.h"
#include "models/vit/vit.h"
#include "models/vit/vit_tp.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using namespace eng::models;

namespace {

// The grids this world size allows: (tp, cp) with cp > 1 where possible.
std::vector<std::pair<int, int>> grids(int P) {
  std::vector<std::pair<int, int>> g{{1, P}};
  if (P == 4) g.push_back({2, 2});
  return g;
}

Tensor ids(int64_t B, int64_t T, int64_t V, int64_t salt) {
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((int64_t(i) * 31 + salt * 7 + 5) % V);
  return Tensor::from_ints(v, {B, T});
}

// The mean over the cp group of x (a loss or a gathered gradient), on the host.
std::vector<double> cp_mean(const Tensor& x, Communicator& cp) {
  Tensor t = x.detach().to(DType::f32).clone();  // on the communicator's device
  cp.all_reduce(t, ReduceOp::avg).wait();
  return test::values(t.to(kCPU));
}

template <typename Serial, typename Split>
void check_grads(const Serial& serial, const Split& model, Communicator& cp) {
  const auto params = model.named_parameters();
  const auto ref = serial.named_parameters();
  REQUIRE(params.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO(ref[i].first << " gradient");
    const Tensor g = model.unshard(params[i].first, params[i].second.grad());
    CHECK_CLOSE(cp_mean(g, cp), test::values(ref[i].second.grad().to(kCPU)), 1e-5, 1e-4);
  }
}

}  // namespace

TEST_CASE("gpt2 under cp equals the serial model: the mean loss and gradient over cp", "[dist][cp]") {
  const int P = Group::world_group().size();
  GPT2Config cfg;
  cfg.vocab_size = 97, cfg.block_size = 12, cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 16;
  const int64_t B = 2, T = 12;  // 12 positions divide by 1..4
  for (const auto& [tp, cpn] : grids(P))
    for (const auto& s : dist_test::setups())
      for (bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        INFO(s.name() << " tp " << tp << " cp " << cpn << (sp ? " sequence parallel" : ""));
        const Grid grid(tp, cpn);
        auto tpc = make_communicator(grid.tp_group(), s.dev, s.backend);
        auto cpc = make_communicator(grid.cp_group(), s.dev, s.backend);
        GPT2 serial(cfg, 3, s.dev);
        GPT2Tp model(cfg, 3, s.dev, *tpc, GPT2TpOptions{sp, cpc.get()});
        const Tensor x = ids(B, T, cfg.vocab_size, 1), y = ids(B, T, cfg.vocab_size, 2);
        Tensor ls = serial.loss(x.to(s.dev), y.to(s.dev));
        ls.backward();
        Tensor l = model.loss(cp_slice(x, 1, *cpc).to(s.dev), cp_slice(y, 1, *cpc).to(s.dev));
        l.backward();
        model.sync_partial_grads();
        CHECK_CLOSE(cp_mean(l, *cpc), test::values(ls.to(kCPU)), 1e-5, 1e-5);
        check_grads(serial, model, *cpc);
      }
}

TEST_CASE("vit under cp equals the serial model: both heads, the mean loss and gradient over cp", "[dist][cp]") {
  const int P = Group::world_group().size();
  ViTConfig cfg;
  cfg.in_channels = 2, cfg.img_h = 6, cfg.img_w = 8, cfg.patch = 2;  // 12 tokens divide by 1..4
  cfg.embed = 16, cfg.depth = 2, cfg.heads = 4, cfg.classes = 5, cfg.out_channels = 3;
  const int64_t B = 2;
  const Tensor images = Tensor::randn({B, 2, 6, 8}, 5), fields = Tensor::randn({B, 3, 6, 8}, 6);
  const Tensor labels = Tensor::from_ints({1, 4}, {B});
  for (const auto& [tp, cpn] : grids(P))
    for (const auto& s : dist_test::setups())
      for (ViTHead hd : {ViTHead::dense, ViTHead::classify}) {
        if (s.dev.type != DeviceType::cpu && hd == ViTHead::classify) continue;  // emu: the dense head
        INFO(s.name() << " tp " << tp << " cp " << cpn << (hd == ViTHead::dense ? " dense" : " classify"));
        cfg.head = hd;
        const Grid grid(tp, cpn);
        auto tpc = make_communicator(grid.tp_group(), s.dev, s.backend);
        auto cpc = make_communicator(grid.cp_group(), s.dev, s.backend);
        ViT serial(cfg, 3, s.dev);
        ViTTp model(cfg, 3, s.dev, *tpc, ViTTpOptions{tp > 1, cpc.get()});
        const Tensor x = images.to(s.dev), y = (hd == ViTHead::dense ? fields : labels).to(s.dev);
        Tensor ls = serial.loss(x, y);
        ls.backward();
        Tensor l = model.loss(x, y);
        l.backward();
        model.sync_partial_grads();
        CHECK_CLOSE(cp_mean(l, *cpc), test::values(ls.to(kCPU)), 1e-5, 1e-5);
        check_grads(serial, model, *cpc);
        NoGradGuard ng;
        CHECK_CLOSE(test::values(model.forward(x).to(kCPU)), test::values(serial.forward(x).to(kCPU)), 1e-5, 1e-4);
      }
}
