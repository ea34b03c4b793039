// GPT-2 and the ViT in pipeline stages against the serial model built from the same
// seed: the whole world as the pp group (np 1..4: 1 to 4 stages of a
// 4-block model, a tp group of one), and at np 4 pp 2 x tp 2 (sequence
// parallel). Every stage runs its plan (afab and 1f1b) over m = 5
// micro-batches through models/train's PipelineStep, the tied token table's
// gradient is summed over the grid's embed group, and then: the last
// stage's losses are the serial model's per micro-batch, and every
// parameter's gradient (gathered over tp) is the serial gradient of the
// mean loss over the micro-batches (1e-5 abs + 1e-4 rel: the stages only
// move tensors, so the sums are the serial ones but for tp's reordering).
// The ViT (4 blocks, both heads, no tied parameter) the same way, with each
// micro-batch's images and targets.
#include <catch2/catch.hpp>
#include <tuple>

#include "comm/grid.h"
#include "dist_util.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_tp.h"
#include "models/train/pipeline_step.h"
#include "models/vit/vit.h"
#include "models/vit/vit_tp.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using namespace eng::models;

namespace {

Tensor ids(int64_t B, int64_t T, int64_t V, int64_t salt) {
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((int64_t(i) * 31 + salt * 7 + 5) % V);
  return Tensor::from_ints(v, {B, T});
}

// Every parameter of the stage (gathered over tp) against the serial model's of the same name.
void check_grads(const TpModel& stage, const Module& serial) {
  const auto ref = serial.named_parameters();
  for (const auto& [name, p] : stage.named_parameters()) {
    INFO(name << " gradient");
    const Tensor* r = nullptr;
    for (const auto& [n, q] : ref)
      if (n == name) r = &q;
    REQUIRE(r);
    CHECK_CLOSE(test::values(stage.unshard(name, p.grad()).to(kCPU)), test::values(r->grad().to(kCPU)), 1e-5, 1e-4);
  }
}

}  // namespace

TEST_CASE("gpt2 in pipeline stages equals the serial model: losses and gradients, afab and 1f1b", "[dist][pp]") {
  const int P = Group::world_group().size();
  GPT2Config cfg;
  cfg.vocab_size = 97, cfg.block_size = 8, cfg.n_layer = 4, cfg.n_head = 4, cfg.n_embd = 16;
  const int64_t B = 2, T = 8, m = 5;
  std::vector<std::pair<int, int>> grids{{P, 1}};  // (pp, tp)
  if (P == 4) grids.push_back({2, 2});
  for (const auto& [pp, tp] : grids)
    for (const auto& s : dist_test::setups())
      for (PipeSchedule kind : {PipeSchedule::afab, PipeSchedule::one_f_one_b}) {
        // The schedule is host logic, the same on every device: cpu runs
        // both, each emu backend one (mpi afab, the NCCL look-alike 1f1b).
        const PipeSchedule emu_kind = s.backend == Backend::mpi ? PipeSchedule::afab : PipeSchedule::one_f_one_b;
        if (s.dev.type != DeviceType::cpu && kind != emu_kind) continue;
        INFO(s.name() << " pp " << pp << " tp " << tp << " " << pipe_schedule_name(kind));
        const Grid grid(tp, 1, pp);
        auto tpc = make_communicator(grid.tp_group(), s.dev, s.backend);
        auto ppc = make_communicator(grid.pp_group(), s.dev, s.backend);
        auto embed = make_communicator(grid.embed_group(), s.dev, s.backend);
        // Blocks 4 over the stages: 4 | 2,2 | 2,1,1 | 1,1,1,1.
        const std::vector<int64_t> layers = stage_layers("", std::vector<double>(4, 1.0), 0.0, 0.5, pp);
        GPT2TpOptions o{tp > 1, nullptr};
        for (int k = 0; k < grid.pp_rank(); ++k) o.layer_begin += layers[size_t(k)];
        o.layer_end = o.layer_begin + layers[size_t(grid.pp_rank())];
        GPT2Tp stage(cfg, 3, s.dev, *tpc, o);
        GPT2 serial(cfg, 3, s.dev);
        std::vector<Tensor> xs, ys;
        std::vector<double> want;
        for (int64_t i = 0; i < m; ++i) {
          xs.push_back(ids(B, T, cfg.vocab_size, 2 * i).to(s.dev));
          ys.push_back(ids(B, T, cfg.vocab_size, 2 * i + 1).to(s.dev));
          Tensor l = serial.loss(xs.back(), ys.back());
          want.push_back(l.item());
          scale(l, 1.0 / double(m)).backward();
        }
        PipelineStep pipe(*ppc, kind, m);
        const StageIo io{stage.stage_rows(B, T), DType::f32};
        const std::vector<Tensor> losses = pipe.run(
            [&](int64_t i, const Tensor& in) {
              const Tensor out = stage.stage_forward(in, xs[size_t(i)]);
              return pipe.last() ? stage.stage_loss(out, ys[size_t(i)]) : out;
            },
            io, nullptr);
        std::vector<double> got;
        for (const Tensor& l : losses) got.push_back(l.item());
        stage.sync_partial_grads();
        if (pp > 1 && stage.wte) {
          Tensor g = stage.wte->weight.grad();
          embed->all_reduce(g, ReduceOp::sum).wait();
        }
        if (pipe.last())
          CHECK_CLOSE(got, want, 1e-5, 1e-5);
        else
          CHECK(got.empty());
        check_grads(stage, serial);
      }
}

TEST_CASE("the vit in pipeline stages equals the serial model: both heads, losses and gradients", "[dist][pp]") {
  const int P = Group::world_group().size();
  ViTConfig cfg;
  cfg.in_channels = 2, cfg.img_h = 4, cfg.img_w = 8, cfg.patch = 2;
  cfg.embed = 16, cfg.depth = 4, cfg.heads = 4, cfg.classes = 5, cfg.out_channels = 3;
  const int64_t B = 2, m = 3;
  for (const auto& s : dist_test::setups())
    for (ViTHead hd : {ViTHead::dense, ViTHead::classify})
      for (PipeSchedule kind : {PipeSchedule::afab, PipeSchedule::one_f_one_b}) {
        if (s.dev.type != DeviceType::cpu && (hd == ViTHead::classify || kind == PipeSchedule::afab)) continue;
        INFO(s.name() << " pp " << P << (hd == ViTHead::dense ? " dense " : " classify ") << pipe_schedule_name(kind));
        cfg.head = hd;
        const Grid grid(1, 1, P);
        auto tpc = make_communicator(grid.tp_group(), s.dev, s.backend);
        auto ppc = make_communicator(grid.pp_group(), s.dev, s.backend);
        const std::vector<int64_t> layers = stage_layers("", std::vector<double>(4, 1.0), 0.0, 0.0, P);
        ViTTpOptions o;
        std::tie(o.layer_begin, o.layer_end) = stage_blocks(layers, grid.pp_rank());
        ViTTp stage(cfg, 3, s.dev, *tpc, o);
        ViT serial(cfg, 3, s.dev);
        std::vector<Tensor> xs, ys;
        std::vector<double> want;
        for (int64_t i = 0; i < m; ++i) {
          xs.push_back(Tensor::randn({B, 2, 4, 8}, uint64_t(10 + i)).to(s.dev));
          ys.push_back((hd == ViTHead::dense ? Tensor::randn({B, 3, 4, 8}, uint64_t(20 + i))
                                             : Tensor::from_ints({int32_t(i % 5), int32_t((i + 2) % 5)}, {B}))
                           .to(s.dev));
          Tensor l = serial.loss(xs.back(), ys.back());
          want.push_back(l.item());
          scale(l, 1.0 / double(m)).backward();
        }
        PipelineStep pipe(*ppc, kind, m);
        const std::vector<Tensor> losses = pipe.run(
            [&](int64_t i, const Tensor& in) {
              const Tensor out = stage.stage_forward(in, xs[size_t(i)]);
              return pipe.last() ? stage.stage_loss(out, ys[size_t(i)]) : out;
            },
            {stage.stage_rows(B), DType::f32}, nullptr);
        std::vector<double> got;
        for (const Tensor& l : losses) got.push_back(l.item());
        if (pipe.last()) CHECK_CLOSE(got, want, 1e-5, 1e-5);
        check_grads(stage, serial);
      }
}
