// Tensor parallelism against serial references, with the whole world as the
// tp group (np 1..4; 3 checks uneven group sizes against dims that divide):
//  - each mapping (comm/tp_mappings.h), forward and backward, on per-rank
//    inputs of small integers, so every sum is exact and compared exactly;
//  - the parallel linear layers (comm/tp_layers.h) against their serial
//    twins built from the same seed: column then row (the MLP), with and
//    without sequence parallelism, and c_attn's three-block column split.
//    Outputs and every gradient (shards gathered) within fp32 tolerance:
//    1e-5 absolute + 1e-5 relative (the sums over tp change the order of
//    the additions, nothing else); the vocab-parallel embedding likewise;
//  - the vocab-parallel cross-entropy with a padded vocabulary (97 ids
//    padded to 128 tp) against cross_entropy over the real columns of the
//    full logits: loss and every rank's slice of dlogits, the padding's
//    gradient exactly zero.
#include <algorithm>
#include <catch2/catch.hpp>

#include "comm/tp_layers.h"
#include "comm/tp_mappings.h"
#include "comm/vocab_parallel.h"
#include "dist_util.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using dist_test::setups;
using dist_test::values;

namespace {

Tensor ints(int r, const Shape& s, Device dev, int64_t first = 0) {
  return Tensor::from_vector(values(r, shape_numel(s), first), s, DType::f32, dev);
}

std::vector<float> host(const Tensor& t) { return t.to(kCPU).to_vector(); }

// Rows [r k, (r + 1) k) of every rank's (P k, C) tensor, summed.
std::vector<float> sum_over_ranks(int P, const Shape& s, int64_t first) {
  std::vector<float> out(size_t(shape_numel(s)), 0.f);
  for (int r = 0; r < P; ++r) {
    const std::vector<float> v = values(r, shape_numel(s), first);
    for (size_t i = 0; i < out.size(); ++i) out[i] += v[i];
  }
  return out;
}

Tensor leaf(const Tensor& t) { return t.detach().clone().set_requires_grad(true); }

// The backward seeded with y's incoming gradient g.
void backward_with(const Tensor& y, const Tensor& g) { y.backward(g); }

}  // namespace

TEST_CASE("tp mappings: each forward and backward against its serial definition", "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  const int64_t R = 3, n = 5, k = 2, C = 3;  // rows, last-dim shard, row shard, channels
  for (const auto& s : setups()) {
    INFO(s.name());
    auto tp = make_communicator(world, s.dev, s.backend);
    const Device dev = s.dev;

    // copy_to_tp: identity; the gradient is summed over tp.
    Tensor x = leaf(ints(0, {R, n}, dev));
    Tensor y = copy_to_tp(x, *tp);
    CHECK(host(y) == host(x));
    backward_with(y, ints(me, {R, n}, dev, 100));
    CHECK(host(x.grad()) == sum_over_ranks(P, {R, n}, 100));

    // reduce_from_tp: summed; the gradient passes through.
    x = leaf(ints(me, {R, n}, dev));
    y = reduce_from_tp(x, *tp);
    CHECK(host(y) == sum_over_ranks(P, {R, n}, 0));
    backward_with(y, ints(0, {R, n}, dev, 7));
    CHECK(host(x.grad()) == values(0, R * n, 7));

    // scatter_to_tp: my columns; the gradient is every rank's, side by side.
    const Tensor full = ints(0, {R, P * n}, dev);
    x = leaf(full);
    y = scatter_to_tp(x, *tp);
    CHECK(host(y) == host(narrow(full, 1, me * n, n)));
    backward_with(y, ints(me, {R, n}, dev, 50));
    std::vector<Tensor> parts;
    for (int r = 0; r < P; ++r) parts.push_back(ints(r, {R, n}, kCPU, 50));
    const std::vector<float> side_by_side = concat(parts, 1).to_vector();
    CHECK(host(x.grad()) == side_by_side);

    // gather_from_tp: every rank's columns; the gradient is my columns.
    x = leaf(ints(me, {R, n}, dev, 50));
    y = gather_from_tp(x, *tp);
    CHECK(host(y) == side_by_side);
    backward_with(y, full);
    CHECK(host(x.grad()) == host(narrow(full, 1, me * n, n)));

    // gather_from_sp: every rank's rows; the gradient is my rows of the sum.
    x = leaf(ints(me, {k, C}, dev));
    y = gather_from_sp(x, *tp);
    std::vector<Tensor> blocks;
    for (int r = 0; r < P; ++r) blocks.push_back(ints(r, {k, C}, kCPU));
    const std::vector<float> stacked = concat(blocks, 0).to_vector();
    CHECK(host(y) == stacked);
    backward_with(y, ints(me, {P * k, C}, dev, 30));
    CHECK(host(x.grad()) == sum_over_ranks(P, {k, C}, 30 + me * k * C));

    // reduce_scatter_to_sp: my rows of the sum; the gradient is every rank's rows.
    x = leaf(ints(me, {P * k, C}, dev, 30));
    y = reduce_scatter_to_sp(x, *tp);
    CHECK(host(y) == sum_over_ranks(P, {k, C}, 30 + me * k * C));
    backward_with(y, ints(me, {k, C}, dev));
    CHECK(host(x.grad()) == stacked);

    // scatter_to_sp: my rows; the gradient is every rank's rows.
    const Tensor tall = ints(0, {P * k, C}, dev, 9);
    x = leaf(tall);
    y = scatter_to_sp(x, *tp);
    CHECK(host(y) == host(narrow(tall, 0, me * k, k)));
    backward_with(y, ints(me, {k, C}, dev));
    CHECK(host(x.grad()) == stacked);

    // gather_from_sp_to_replicated: every rank's rows; the gradient (the
    // same whole on every rank, as a replicated consumer gives it) is my rows.
    x = leaf(ints(me, {k, C}, dev));
    y = gather_from_sp_to_replicated(x, *tp);
    CHECK(host(y) == stacked);
    backward_with(y, tall);
    CHECK(host(x.grad()) == host(narrow(tall, 0, me * k, k)));

    // Shapes that do not divide: one-line errors naming the shape and tp.
    if (P > 1) {
      CHECK_THROWS_WITH(scatter_to_tp(ints(0, {2, P * n + 1}, dev), *tp),
                        Catch::Contains("does not divide by tp " + std::to_string(P)));
      CHECK_THROWS_WITH(scatter_to_sp(ints(0, {P * k + 1, C}, dev), *tp), Catch::Contains("dim 0 of f32("));
    }
  }
}

namespace {

// The serial twin's values and gradients against the parallel layer's
// gathered ones.
void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  CHECK_CLOSE(test::values(got.to(kCPU)), test::values(want.to(kCPU)), 1e-5, 1e-5);
}

}  // namespace

TEST_CASE("tp layers: column then row parallel equals the serial MLP, with and without sequence parallel",
          "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  const int64_t rows = 12, in = 8, hidden = 24, out = 6;  // hidden and rows divide by 1..4
  for (const auto& s : setups())
    for (bool sp : {false, true}) {
      INFO(s.name() << (sp ? " sequence parallel" : ""));
      auto tp = make_communicator(world, s.dev, s.backend);
      const InitOptions i1{11, DType::f32, s.dev, 0.f}, i2{12, DType::f32, s.dev, 0.f};
      // The serial twins: every rank builds them from the same seeds.
      Linear fc(in, hidden, Bias::yes, i1), proj(hidden, out, Bias::yes, i2);
      TpLinearOptions o;
      o.sequence_parallel = sp;
      ColumnParallelLinear col(in, hidden, Bias::yes, i1, *tp, o);
      RowParallelLinear row(hidden, out, Bias::yes, i2, *tp, o);
      check_close(col.full_weight(), fc.weight, "column weight at init");
      check_close(row.full_weight(), proj.weight, "row weight at init");

      const Tensor x0 = Tensor::randn({rows, in}, 5).to(s.dev), g = Tensor::randn({rows, out}, 6).to(s.dev);
      Tensor xs = leaf(x0);
      Tensor ys = proj.forward(fc.forward_gelu(xs));
      backward_with(ys, g);

      const int64_t k = rows / P;
      Tensor x = leaf(sp ? narrow(x0, 0, me * k, k) : x0);
      Tensor y = row.forward(col.forward_gelu(x));
      check_close(y, sp ? narrow(ys, 0, me * k, k) : ys, "output");
      backward_with(y, sp ? narrow(g, 0, me * k, k) : g);
      check_close(x.grad(), sp ? narrow(xs.grad(), 0, me * k, k) : xs.grad(), "input gradient");
      check_close(unshard_rows(col.weight.grad(), 1, *tp), fc.weight.grad(), "column weight gradient");
      check_close(unshard_rows(col.bias.grad(), 1, *tp), fc.bias.grad(), "column bias gradient");
      check_close(unshard_cols(row.weight.grad(), *tp), proj.weight.grad(), "row weight gradient");
      // The row bias sees only this rank's rows under sequence parallel: its
      // gradient is summed over tp before it equals the serial one.
      Tensor db = row.bias.grad().clone();
      if (sp) tp->all_reduce(db, ReduceOp::sum).wait();
      check_close(db, proj.bias.grad(), "row bias gradient");
    }
}

TEST_CASE("tp layers: a three-block column split gives each rank whole heads of q, k and v", "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  const int64_t rows = 4, C = 12;  // C / P whole "heads" of width 1..
  for (const auto& s : setups()) {
    INFO(s.name());
    auto tp = make_communicator(world, s.dev, s.backend);
    const InitOptions init{21, DType::f32, s.dev, 0.02f};
    Linear attn(C, 3 * C, Bias::yes, init);
    TpLinearOptions o;
    o.groups = 3;
    ColumnParallelLinear col(C, 3 * C, Bias::yes, init, *tp, o);
    check_close(col.full_weight(), attn.weight, "gathered weight");
    const Tensor x = Tensor::randn({rows, C}, 22).to(s.dev);
    const Tensor ys = attn.forward(x), y = col.forward(x);
    // This rank's output is its slice of q, then of k, then of v.
    const int64_t n = C / P;
    std::vector<Tensor> mine;
    for (int b = 0; b < 3; ++b) mine.push_back(narrow(ys, 1, b * C + me * n, n));
    check_close(y, concat(mine, 1), "output: my q, k and v columns");
    // load_full puts another full weight's shards back in place.
    const Tensor w2 = Tensor::randn({3 * C, C}, 23).to(s.dev), b2 = Tensor::randn({3 * C}, 24).to(s.dev);
    col.load_full(w2, b2);
    check_close(col.full_weight(), w2, "weight after load_full");
    check_close(col.full_bias(), b2, "bias after load_full");
  }
  if (P > 1)
    CHECK_THROWS_WITH(
        RowParallelLinear(4 * P + 1, 3, Bias::no, InitOptions{}, *make_communicator(world, kCPU, Backend::mpi)),
        Catch::Contains("RowParallelLinear: " + std::to_string(4 * P + 1) + " input features do not divide by tp " +
                        std::to_string(P)));
}

TEST_CASE("tp vocab-parallel cross-entropy equals the serial loss over a padded vocabulary", "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  const int64_t N = 10, vocab = 97, padded = padded_vocab(vocab, P), Vs = padded / P;
  CHECK(padded == 128 * P);
  std::vector<int32_t> tg(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) tg[size_t(r)] = r == 3 ? -100 : int32_t((r * 37 + 11) % vocab);
  for (const auto& s : setups())
    for (DType dt : {DType::f32, DType::bf16}) {
      if (s.dev.type == DeviceType::cpu && dt != DType::f32) continue;
      INFO(s.name() << " " << dtype_name(dt));
      auto tp = make_communicator(world, s.dev, s.backend);
      // The full logits, the same on every rank; the serial loss sees the real columns only.
      const Tensor full = Tensor::randn({N, padded}, 31, 3.f).to(dt).to(DType::f32);
      Tensor xs = leaf(narrow(full, 1, 0, vocab));
      Tensor ls = cross_entropy(xs, Tensor::from_ints(tg, {N}));
      ls.backward();
      Tensor x = leaf(narrow(full, 1, me * Vs, Vs).to(dt).to(s.dev));
      Tensor loss = vocab_parallel_cross_entropy(x, Tensor::from_ints(tg, {N}, s.dev), vocab, *tp);
      loss.backward();
      const double tol = dt == DType::bf16 ? 8e-3 : 1e-5;
      INFO("loss " << loss.item() << " vs serial " << ls.item());
      CHECK_CLOSE(test::values(loss.to(kCPU)), test::values(ls), tol, tol);
      // My columns of the serial gradient, padded with zeros past the vocabulary.
      const Tensor dfull = concat({xs.grad(), Tensor::zeros({N, padded - vocab})}, 1);
      CHECK_CLOSE(test::values(x.grad().to(kCPU)), test::values(narrow(dfull, 1, me * Vs, Vs)), tol, tol);
      const int64_t pad_here = std::clamp<int64_t>((me + 1) * Vs - vocab, 0, Vs);
      if (pad_here > 0)
        CHECK(test::values(narrow(x.grad(), 1, Vs - pad_here, pad_here).to(kCPU)) ==
              std::vector<double>(size_t(N * pad_here), 0.0));
    }
}

TEST_CASE("tp vocab-parallel embedding equals the serial embedding, with and without sequence parallel", "[dist][tp]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  const int64_t vocab = 97, C = 8, B = 3, T = 4;  // B T = 12 rows divide by 1..4
  std::vector<int32_t> idv(static_cast<size_t>(B * T));
  for (size_t i = 0; i < idv.size(); ++i) idv[i] = int32_t((i * 41 + 3) % vocab);
  for (const auto& s : setups())
    for (bool sp : {false, true}) {
      INFO(s.name() << (sp ? " sequence parallel" : ""));
      auto tp = make_communicator(world, s.dev, s.backend);
      const InitOptions init{41, DType::f32, s.dev, 0.02f};
      Embedding serial(vocab, C, init);
      VocabParallelEmbedding emb(vocab, C, init, *tp, sp);
      CHECK(emb.weight.size(0) == padded_vocab(vocab, P) / P);
      check_close(emb.full_weight(), serial.weight, "table at init");
      const Tensor ids = Tensor::from_ints(idv, {B, T}, s.dev), g = Tensor::randn({B * T, C}, 42).to(s.dev);
      Tensor ys = serial.forward(ids).reshape({B * T, C});
      ys.backward(g);
      const int64_t k = B * T / P;
      Tensor y = emb.forward(ids);
      check_close(y, sp ? narrow(ys, 0, me * k, k) : ys, "output rows");
      y.backward(sp ? narrow(g, 0, me * k, k) : g);
      check_close(emb.unshard(emb.weight.grad()), serial.weight.grad(), "table gradient");
      // The padding rows (ids >= vocab) get no gradient.
      const Tensor all = unshard_rows(emb.weight.grad(), 1, *tp);
      CHECK(test::values(narrow(all, 0, vocab, all.size(0) - vocab).to(kCPU)) ==
            std::vector<double>(size_t((all.size(0) - vocab) * C), 0.0));
    }
}
