// The Llama split over tp, cp and pp (models/llama/llama_tp.h) against the
// serial model built from the same seed, as GPT-2's (dist_gpt2_tp.cpp,
// dist_cp_models.cpp, dist_pp_models.cpp) with the Llama's own parts:
// grouped K/V heads split with the query heads (two K/V heads a rank at
// every tp, each shared by its group of query heads), the packed gate|up and
// qkv blocks of unequal rows, rotary positions at each cp slice's offset,
// an untied head (tp, cp) and a tied one (pp: the table on the first and
// last stage, its gradient summed over the embed group).
//   tp: the whole world as the tp group, with and without sequence
//     parallelism, and with recompute: weights at init, loss, every
//     gathered gradient (1e-5 abs + 1e-4 rel), replicated gradients the same
//     bits on every rank; a full state back into the shards; a tp that
//     does not divide n_kv_head refused in one line.
//   cp: the world as cp (np 4 also tp 2 x cp 2): the mean over cp of the
//     losses and gradients is the serial one.
//   pp: the world as stages (np 4 also pp 2 x tp 2), afab and 1f1b over 5
//     micro-batches: the last stage's losses, every gradient.
#include <catch2/catch.hpp>

#include "comm/cp_mappings.h"
#include "comm/grid.h"
#include "comm/pipeline_schedule.h"
#include "dist_util.h"
#include "models/llama/llama.h"
#include "models/llama/llama_tp.h"
#include "models/train/pipeline_step.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using namespace eng::models;

namespace {

// 24 heads on 2 tp K/V heads: each rank holds two K/V heads, each shared by
// its group of 6 (tp 2: 12 query heads a rank).
LlamaConfig config(int tp, bool tied = false) {
  LlamaConfig c;
  c.vocab_size = 97, c.block_size = 16, c.n_layer = 2, c.n_head = 24, c.n_embd = 96, c.ffn_hidden = 48;
  c.n_kv_head = 2 * tp;
  c.rope.theta = 500000, c.rope.factor = 8, c.rope.original_max_positions = 8;
  c.tie_embeddings = tied;
  return c;
}

Tensor ids(int64_t B, int64_t T, int64_t V, int64_t salt) {
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((int64_t(i) * 31 + salt * 7 + 5) % V);
  return Tensor::from_ints(v, {B, T});
}

std::vector<double> mean_over(const Tensor& x, Communicator& c) {
  Tensor t = x.detach().to(DType::f32).clone();
  c.all_reduce(t, ReduceOp::avg).wait();
  return test::values(t.to(kCPU));
}

// Every parameter of the split model (gathered over tp, averaged over cp)
// against the serial model's of the same name.
void check_grads(const LlamaTp& model, const Llama& serial, Communicator* cp) {
  const auto ref = serial.named_parameters();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name << " gradient");
    const Tensor* r = nullptr;
    for (const auto& [n, q] : ref)
      if (n == name) r = &q;
    REQUIRE(r);
    const Tensor g = model.unshard(name, p.grad());
    CHECK_CLOSE(cp ? mean_over(g, *cp) : test::values(g.to(kCPU)), test::values(r->grad().to(kCPU)), 1e-5, 1e-4);
  }
}

}  // namespace

TEST_CASE("llama under tp equals the serial model: init, loss, every gathered gradient", "[dist][tp][llama]") {
  const Group world = Group::world_group();
  const LlamaConfig cfg = config(world.size());
  const int64_t B = 2, T = 6;  // 12 rows divide by 1..4
  for (const auto& s : dist_test::setups())
    for (bool sp : {false, true})
      for (Recompute rc : {Recompute::no, Recompute::yes}) {
        if (rc == Recompute::yes && (sp || s.dev.type != DeviceType::cpu)) continue;
        INFO(s.name() << (sp ? " sequence parallel" : "") << (rc == Recompute::yes ? " recompute" : ""));
        auto tp = make_communicator(world, s.dev, s.backend);
        Llama serial(cfg, 3, s.dev);
        LlamaTp model(cfg, 3, s.dev, *tp, LlamaTpOptions{sp});
        const auto full = model.full_state();
        const auto ref = serial.named_parameters();
        REQUIRE(full.size() == ref.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          INFO(ref[i].first << " at init");
          CHECK(full[i].first == ref[i].first);
          CHECK(full[i].second.to(kCPU).to_vector() == ref[i].second.to(kCPU).to_vector());
        }
        const Tensor x = ids(B, T, cfg.vocab_size, 1).to(s.dev), y = ids(B, T, cfg.vocab_size, 2).to(s.dev);
        Tensor ls = serial.loss(x, y, rc);
        ls.backward();
        Tensor l = model.loss(x, y, rc);
        l.backward();
        model.sync_partial_grads();
        CHECK_CLOSE(test::values(l.to(kCPU)), test::values(ls.to(kCPU)), 1e-5, 1e-5);
        check_grads(model, serial, nullptr);
        for (const Tensor& p : model.replicated_parameters()) CHECK(dist_test::same_on_every_rank(p.grad(), *tp));
      }
}

TEST_CASE("llama under tp: a full state loads into the shards; K/V heads that do not divide are refused",
          "[dist][tp][llama]") {
  const Group world = Group::world_group();
  const int P = world.size();
  auto tp = make_communicator(world, kCPU, Backend::mpi);
  const LlamaConfig cfg = config(P);
  Llama other(cfg, 8, kCPU);
  LlamaTp model(cfg, 3, kCPU, *tp);
  model.load_full_state(other.named_parameters());
  const auto got = model.full_state();
  const auto want = other.named_parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    CHECK(got[i].second.to_vector() == want[i].second.to_vector());
  }
  if (P > 1) {
    LlamaConfig bad = cfg;
    bad.n_kv_head = P == 4 ? 2 : 1;
    CHECK_THROWS_WITH(LlamaTp(bad, 1, kCPU, *tp), Catch::Contains("n_kv_head " + std::to_string(bad.n_kv_head) +
                                                                  " does not divide by tp " + std::to_string(P)));
  }
}

TEST_CASE("llama under cp equals the serial model: the rotary offsets of each slice", "[dist][cp][llama]") {
  const int P = Group::world_group().size();
  std::vector<std::pair<int, int>> grids{{1, P}};  // (tp, cp)
  if (P == 4) grids.push_back({2, 2});
  const int64_t B = 2, T = 12;  // 12 positions divide by 1..4
  for (const auto& [tp, cpn] : grids)
    for (const auto& s : dist_test::setups()) {
      INFO(s.name() << " tp " << tp << " cp " << cpn);
      const LlamaConfig cfg = config(tp);
      const Grid grid(tp, cpn);
      auto tpc = make_communicator(grid.tp_group(), s.dev, s.backend);
      auto cpc = make_communicator(grid.cp_group(), s.dev, s.backend);
      Llama serial(cfg, 3, s.dev);
      LlamaTp model(cfg, 3, s.dev, *tpc, LlamaTpOptions{tp > 1, cpc.get()});
      const Tensor x = ids(B, T, cfg.vocab_size, 1), y = ids(B, T, cfg.vocab_size, 2);
      Tensor ls = serial.loss(x.to(s.dev), y.to(s.dev));
      ls.backward();
      Tensor l = model.loss(cp_slice(x, 1, *cpc).to(s.dev), cp_slice(y, 1, *cpc).to(s.dev));
      l.backward();
      model.sync_partial_grads();
      CHECK_CLOSE(mean_over(l, *cpc), test::values(ls.to(kCPU)), 1e-5, 1e-5);
      check_grads(model, serial, cpc.get());
    }
}

TEST_CASE("llama in pipeline stages equals the serial model: the tied table, afab and 1f1b", "[dist][pp][llama]") {
  const int P = Group::world_group().size();
  const int64_t B = 2, T = 8, m = 5;
  std::vector<std::pair<int, int>> grids{{P, 1}};  // (pp, tp)
  if (P == 4) grids.push_back({2, 2});
  for (const auto& [pp, tp] : grids)
    for (const auto& s : dist_test::setups())
      for (PipeSchedule kind : {PipeSchedule::afab, PipeSchedule::one_f_one_b}) {
        const PipeSchedule emu_kind = s.backend == Backend::mpi ? PipeSchedule::afab : PipeSchedule::one_f_one_b;
        if (s.dev.type != DeviceType::cpu && kind != emu_kind) continue;
        INFO(s.name() << " pp " << pp << " tp " << tp << " " << pipe_schedule_name(kind));
        LlamaConfig cfg = config(tp, true);
        cfg.n_layer = 4;
        const Grid grid(tp, 1, pp);
        auto tpc = make_communicator(grid.tp_group(), s.dev, s.backend);
        auto ppc = make_communicator(grid.pp_group(), s.dev, s.backend);
        auto embed = make_communicator(grid.embed_group(), s.dev, s.backend);
        const std::vector<int64_t> layers = stage_layers("", std::vector<double>(4, 1.0), 0.0, 0.5, pp);
        LlamaTpOptions o{tp > 1, nullptr};
        for (int k = 0; k < grid.pp_rank(); ++k) o.layer_begin += layers[size_t(k)];
        o.layer_end = o.layer_begin + layers[size_t(grid.pp_rank())];
        LlamaTp stage(cfg, 3, s.dev, *tpc, o);
        Llama serial(cfg, 3, s.dev);
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
        if (pp > 1 && stage.embed_tokens) {
          Tensor g = stage.embed_tokens->weight.grad();
          embed->all_reduce(g, ReduceOp::sum).wait();
        }
        if (pipe.last())
          CHECK_CLOSE(got, want, 1e-5, 1e-5);
        else
          CHECK(got.empty());
        check_grads(stage, serial, nullptr);
      }
}
