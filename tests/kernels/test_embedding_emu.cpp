// kernels/cuda/embedding.cu under the emulator against the cpu reference:
// forward and the bucketed backward in f32, bf16 and f16, on channel counts
// that are and are not multiples of a 16-byte pack, with repeated ids, more
// rows of dw than the emulator's 4-block grid holds in one pass, ids absent
// from the batch (their rows of dw must be zero), bitwise-identical dw across
// runs, and an unaligned view of the weight; a shard of the vocabulary (tp)
// against the whole table with the other rows zeroed, on cpu and emu; the
// token and position embeddings fused (embedding_positions) against their
// composition, bit for bit where the sums are the same.
// Tolerances: the forward is a copy (exact); the backward sums in fp32 and
// rounds once, as the reference sums in f32 on rounded values: emu_check.h's.
#include <algorithm>
#include <string>
#include <utility>

#include "engine/autograd.h"
#include "engine/kernel_profile.h"
#include "engine/ops.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/bucket_by_id.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
// n ids in [0, V) with repeats (id 0 three times when n >= 5), skipping some ids.
std::vector<int32_t> make_ids(int64_t n, int64_t V) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * i * 5 + 2 * i) % V);
  return ids;
}
}  // namespace

TEST_CASE("emu embedding: forward and backward match the cpu reference", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {1, 5, 37})
      for (int64_t C : {1, 3, 37, 64}) {
        const int64_t V = 11;
        INFO(dtype_name(t) << " n = " << n << " C = " << C);
        const Tensor w = Tensor::randn({V, C}, uint64_t(n * 100 + C));
        const Tensor g = Tensor::randn({n, C}, uint64_t(n * 100 + C + 1));
        const std::vector<int32_t> ids = make_ids(n, V);
        Tensor wr = rounded(w, t).set_requires_grad(true);
        Tensor ref = embedding(wr, Tensor::from_ints(ids, {n}));
        ref.backward(rounded(g, t));
        Tensor we = on_emu(w, t).set_requires_grad(true);
        Tensor out = embedding(we, Tensor::from_ints(ids, {n}, kEmu));
        CHECK(out.device() == kEmu);
        CHECK(out.dtype() == t);
        out.backward(on_emu(g, t));
        CHECK(values(out.to(kCPU)) == values(ref));  // a copy: exact
        CHECK_EMU_CLOSE(we.grad(), wr.grad(), t);
      }
}

TEST_CASE("emu embedding: ids of any shape, repeated ids, absent ids give zero rows", "[emu][kernels]") {
  const int64_t V = 9, C = 8;
  const std::vector<int32_t> ids{4, 4, 0, 4, 8, 0};  // ids 1-3, 5-7 absent
  Tensor we = Tensor::randn({V, C}, 3).to(kEmu).detach().set_requires_grad(true);
  Tensor out = embedding(we, Tensor::from_ints(ids, {2, 3}, kEmu));
  CHECK(out.shape() == Shape{2, 3, C});
  const Tensor g = Tensor::randn({2, 3, C}, 4);
  out.backward(g.to(kEmu));
  const std::vector<double> dw = values(we.grad()), gv = values(g);
  for (int64_t v = 0; v < V; ++v)
    for (int64_t c = 0; c < C; ++c) {
      double want = 0;
      for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == v) want += gv[i * C + size_t(c)];
      CHECK(std::fabs(dw[size_t(v * C + c)] - want) <= 1e-5);
    }
}

// The backward splits a row's positions among up to 8 groups of threads
// (embedding.cu): one id named 100 times (GPT-2's byte tokens repeat so),
// rows narrower than a warp of packs (8 groups) and wider than 256 lanes
// (4 groups, two chunks of channels a row), against the cpu's sum in
// position order.
TEST_CASE("emu embedding: a row named by many positions sums them all, narrow and wide rows", "[emu][kernels]") {
  for (auto [t, C] : {std::pair{DType::bf16, int64_t(64)}, std::pair{DType::f32, int64_t(1100)}}) {
    INFO(dtype_name(t) << " C = " << C);
    const int64_t V = 5, n = 130;
    std::vector<int32_t> ids(size_t(n), 3);  // id 3 a hundred times, the rest spread
    for (int64_t i = 0; i < 30; ++i) ids[size_t(i * 4)] = int32_t(i % 3);
    const Tensor w = Tensor::randn({V, C}, 41), g = Tensor::randn({n, C}, 42);
    Tensor wr = rounded(w, t).set_requires_grad(true);
    embedding(wr, Tensor::from_ints(ids, {n})).backward(rounded(g, t));
    Tensor we = on_emu(w, t).set_requires_grad(true);
    embedding(we, Tensor::from_ints(ids, {n}, kEmu)).backward(on_emu(g, t));
    CHECK_EMU_CLOSE(we.grad(), wr.grad(), t);
  }
}

// kernels/cuda/bucket_by_id.cu against the cpu's counting sort, exactly:
// one, two and three radix passes (V 5, 300, 70000; V itself, the mark of
// an id outside the table, needs the bits too: V 255 and 256 either side of
// a pass), tiles of 256 full and ragged, more tiles than the emulator's
// 4-block grid (1300 positions), digit counts for three chunks of the
// scan's 4096, the last ragged (9000 positions: 36 tiles), no positions, one id named by most
// positions (GPT-2's byte tokens), and a shard's table with ids outside it.
TEST_CASE("emu embedding: the positions bucketed by id on the device equal the cpu's counting sort", "[emu][kernels]") {
  struct Shape {
    int64_t n, V, start, vocab;
  };
  for (const Shape& s : {Shape{0, 5, 0, 5}, Shape{1, 5, 0, 5}, Shape{37, 5, 0, 5}, Shape{256, 255, 0, 255},
                         Shape{257, 256, 0, 256}, Shape{1300, 300, 0, 300}, Shape{1300, 70000, 0, 70000},
                         Shape{9000, 300, 0, 300}, Shape{600, 40, 30, 100}, Shape{600, 70, 30, 100}}) {
    INFO("n " << s.n << " V " << s.V << " start " << s.start);
    CHECK(gpu::bucket_passes(s.V) == (s.V < 256 ? 1 : s.V < 65536 ? 2 : 3));
    std::vector<int32_t> ids = make_ids(s.n, s.vocab);
    for (int64_t i = 0; i < s.n; i += 3) ids[size_t(i)] = int32_t(s.start + 1 < s.vocab ? s.start + 1 : 0);
    std::vector<int32_t> order(size_t(s.n)), row_start(size_t(s.V + 1));
    cpu::bucket_by_id(ids.data(), s.n, s.start, s.V, order.data(), row_start.data());
    const Tensor d_ids = Tensor::from_ints(ids, {s.n}, kEmu);
    Tensor d_order = Tensor::full({s.n}, -1, DType::i32, kEmu), d_start = Tensor::full({s.V + 1}, -1, DType::i32, kEmu);
    Tensor work = Tensor::empty({gpu::bucket_workspace(s.n)}, DType::i32, kEmu);
    ENGINE_GPU_CALL(kEmu, bucket_by_id, d_ids.data<int32_t>(), s.n, s.start, s.V, d_order.data<int32_t>(),
                    d_start.data<int32_t>(), work.data<int32_t>(), nullptr);
    const std::vector<double> got_start = values(d_start.to(kCPU)), got_order = values(d_order.to(kCPU));
    CHECK(got_start == std::vector<double>(row_start.begin(), row_start.end()));
    // The positions past row_start[V] belong to ids outside the table: no bucket reads them.
    const size_t bucketed = size_t(row_start[size_t(s.V)]);
    CHECK(std::vector<double>(got_order.begin(), got_order.begin() + ptrdiff_t(bucketed)) ==
          std::vector<double>(order.begin(), order.begin() + ptrdiff_t(bucketed)));
  }
}

TEST_CASE("emu embedding: backward is bitwise deterministic", "[emu][kernels]") {
  const int64_t V = 7, C = 37, n = 37;
  const Tensor ids = Tensor::from_ints(make_ids(n, V), {n}, kEmu);
  const Tensor g = Tensor::randn({n, C}, 8, 1.f, DType::bf16).to(kEmu);
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    Tensor we = on_emu(Tensor::randn({V, C}, 7), DType::bf16).set_requires_grad(true);
    embedding(we, ids).backward(g);
    runs.push_back(values(we.grad()));
  }
  CHECK(runs[0] == runs[1]);
}

TEST_CASE("emu embedding: unaligned views take the scalar path", "[emu][kernels]") {
  // A (5, 4) f32 weight would move 16-byte packs, but viewed from row 1 of an
  // (11, 2) tensor it starts 8 bytes in.
  const Tensor base = Tensor::randn({11, 2}, 12);
  const Tensor wr = base.slice(1, 11).reshape({5, 4}).detach();
  const Tensor we = base.to(kEmu).slice(1, 11).reshape({5, 4}).detach();
  const std::vector<int32_t> ids{0, 4, 3, 3, 1};
  CHECK(values(embedding(we, Tensor::from_ints(ids, {5}, kEmu)).to(kCPU)) ==
        values(embedding(wr, Tensor::from_ints(ids, {5}))));
}

TEST_CASE("embedding of a vocabulary shard: other ids give zero rows and no gradient", "[emu][kernels]") {
  const int64_t vocab = 13, C = 8, n = 37;
  const Tensor full = Tensor::randn({vocab, C}, 90), g = Tensor::randn({n, C}, 91);
  const Tensor ids = Tensor::from_ints(make_ids(n, vocab), {n});
  for (Device dev : {kCPU, kEmu})
    for (const auto& [start, rows] : {std::pair<int64_t, int64_t>{0, 5}, {5, 5}, {10, 5}, {16, 4}}) {
      INFO(dev.str() << " shard [" << start << ", " << start + rows << ")");
      // The reference: the whole table with the rows outside the shard zeroed (and padded past vocab).
      Tensor masked = Tensor::zeros({std::max(vocab, start + rows), C});
      for (int64_t v = start; v < std::min(vocab, start + rows); ++v)
        masked.slice(v, v + 1).copy_from(full.slice(v, v + 1));
      masked.set_requires_grad(true);
      Tensor ref = embedding(masked, ids);
      ref.backward(g);
      Tensor shard = narrow(masked.detach(), 0, start, rows).to(dev).detach().set_requires_grad(true);
      Tensor out = embedding(shard, ids.to(dev), VocabShard{start, vocab});
      out.backward(g.to(dev));
      CHECK(values(out.to(kCPU)) == values(ref));  // a copy: exact
      CHECK_CLOSE(values(shard.grad().to(kCPU)), values(narrow(masked.grad(), 0, start, rows)), 1e-6, 1e-6);
    }
  CHECK_THROWS_WITH(embedding(full, Tensor::from_ints({3, 13}, {2}), VocabShard{0, 13}),
                    Catch::Contains("id 13 at position 1 outside the vocabulary [0, 13)"));
}

TEST_CASE("emu embedding: ids are checked before the launch", "[emu][kernels]") {
  const Tensor w = Tensor::randn({4, 3}, 1).to(kEmu);
  CHECK_THROWS_WITH(embedding(w, Tensor::from_ints({1, 4}, {2}, kEmu)),
                    Catch::Contains("id 4 at position 1 outside the vocabulary [0, 4)"));
}

TEST_CASE("emu embedding: a table that already has a gradient gets the batch's added in place, to the rows used",
          "[emu][kernels]") {
  // A tied table (GPT-2's wte: the lm_head's dense gradient arrives first)
  // and then micro-batches: the embedding's backward adds into the leaf's
  // gradient (take_leaf_grad) with no add pass, the same values as a
  // separate gradient and an add (bit for bit in f32 where the kernels round
  // like the cpu: the rows' sums first, then one add each); rows no id names
  // keep what they held.
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(dtype_name(t));
    const int64_t V = 23, C = 40, n = 17;  // more rows than the emulator's grid, some absent from the ids
    const std::vector<int32_t> ids = make_ids(n, V);
    const Tensor w0 = Tensor::randn({V, C}, 60), g = Tensor::randn({n, C}, 62), gh = Tensor::randn({V, C}, 63);
    auto run = [&](Device dev, KernelProfile* prof) {
      const bool cpu = dev.type == DeviceType::cpu;
      Tensor w = (cpu ? rounded(w0, t) : on_emu(w0, t)).set_requires_grad(true);
      const Tensor id = Tensor::from_ints(ids, {n}, dev);
      const Tensor gd = cpu ? rounded(g, t) : on_emu(g, t);
      const Tensor ones = Tensor::full({V, C}, 1.0, cpu ? DType::f32 : t, dev);
      mul(w, ones).backward(cpu ? rounded(gh, t) : on_emu(gh, t));  // the head's dense gradient
      if (prof) prof->start();
      embedding(w, id).backward(gd);
      embedding(w, id).backward(gd);  // a second micro-batch
      if (prof) prof->stop();
      return w.grad();
    };
    KernelProfile prof(kEmu);
    const Tensor e = run(kEmu, &prof), c = run(kCPU, nullptr);
    int adds = 0, backwards = 0;
    for (const KernelCall& k : prof.calls()) {
      adds += k.name == "axpy_inplace" || k.name == "add_forward";
      backwards += k.name == "embedding_backward";
    }
    CHECK(adds == 0);
    CHECK(backwards == 2);
    if (t == DType::f32 && kKernelsRoundLikeCpu)
      CHECK(values(e.to(kCPU)) == values(c));
    else
      CHECK_EMU_CLOSE(e, c, t);
  }
}

TEST_CASE("gradcheck: add_positions", "[gradcheck]") {
  // Positions 2..5 of a 7-row table: rows 0, 1 and 6 get no gradient.
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return add_positions(in[0], in[1], 2, DType::f64); },
                  {test::leaf({3, 4, 5}, 70), test::leaf({7, 5}, 71)});
}

// On the cpu (f64) embedding_positions is the composition; its gradients
// by finite differences, both tables, positions 1..4 of 6 rows.
TEST_CASE("gradcheck: embedding_positions", "[gradcheck]") {
  const Tensor ids = Tensor::from_ints({0, 3, 3, 1, 2, 0, 4, 3}, {2, 4});
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return embedding_positions(in[0], ids, in[1], 1, DType::f64); },
                  {test::leaf({5, 3}, 74), test::leaf({6, 3}, 75)});
}

TEST_CASE("emu add_positions: the sum, fused with the cast, and the table's column sums match the cpu",
          "[emu][kernels]") {
  // C 8 (the 4-wide path) and 5 (the scalar path); the sum in f32 and in
  // bf16/f16 (the autocast cast fused): the cpu rounds its f32 sum once.
  for (DType out_t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t C : {8, 5}) {
      INFO(dtype_name(out_t) << " C " << C);
      const int64_t B = 3, T = 6, P = 9, first = 2;
      const Tensor x0 = Tensor::randn({B, T, C}, 80), tab0 = Tensor::randn({P, C}, 81),
                   g0 = Tensor::randn({B, T, C}, 82);
      Tensor xc = x0.clone().set_requires_grad(true), tc = tab0.clone().set_requires_grad(true);
      const Tensor yc = add_positions(xc, tc, first, DType::f32);
      yc.backward(rounded(g0, out_t));
      Tensor xe = on_emu(x0, DType::f32).set_requires_grad(true), te = on_emu(tab0, DType::f32).set_requires_grad(true);
      const Tensor ye = add_positions(xe, te, first, out_t);
      CHECK(ye.dtype() == out_t);
      ye.backward(on_emu(g0, out_t));
      CHECK(values(ye.to(kCPU)) == values(rounded(yc, out_t)));  // one rounding of the same f32 sum
      CHECK(values(xe.grad().to(kCPU)) == values(xc.grad()));    // the gradient passed through
      CHECK_EMU_CLOSE(te.grad(), tc.grad(), DType::f32);         // column sums, another order
      const std::vector<double> dt = values(te.grad().to(kCPU));
      for (int64_t r : {int64_t(0), int64_t(1), P - 1})
        for (int64_t c = 0; c < C; ++c) CHECK(dt[size_t(r * C + c)] == 0.0);  // rows no position reached
    }
  CHECK_THROWS_WITH(add_positions(Tensor::zeros({2, 5, 4}), Tensor::zeros({6, 4}), 2, DType::f32),
                    Catch::Contains("positions 2..6 outside the table's 6 rows"));
  CHECK_THROWS_WITH(add_positions(Tensor::zeros({2, 5, 4}), Tensor::zeros({6, 4}), 0, DType::bf16),
                    Catch::Contains("a 16-bit compute dtype on emu/cuda only"));
}

// GPT-2's embeddings in one op on emu (embedding_positions: fp32 tables, the
// sum in a 16-bit dtype): the output is the composition's it fuses
// (embedding, then add_positions casting) bit for bit, and so is the token
// table's gradient (the same sums in the same order, from the 16-bit
// gradient instead of its fp32 copy); the position table's is the column
// sums of another kernel, equal to fp32 rounding. A second backward (a
// second micro-batch) adds into both gradients in place. Forward, one
// kernel; backward, no cast of the gradient. C = 40 takes 16-byte packs of
// the tables, C = 6 single elements; the positions start at 0 and at 2.
TEST_CASE("emu embedding_positions: the fused token and position embeddings equal their composition",
          "[emu][kernels]") {
  struct Shape {
    int64_t V, C, P, first;
  };
  const int64_t B = 3, T = 7;
  for (DType t : {DType::bf16, DType::f16})
    for (const Shape& s : {Shape{23, 40, 9, 0}, Shape{23, 40, 12, 2}, Shape{5, 6, 7, 0}}) {
      INFO(dtype_name(t) << " V " << s.V << " C " << s.C << " P " << s.P << " first " << s.first);
      const Tensor w0 = Tensor::randn({s.V, s.C}, 70), p0 = Tensor::randn({s.P, s.C}, 71);
      const Tensor ids = Tensor::from_ints(make_ids(B * T, s.V), {B, T}, kEmu);
      const Tensor g1 = Tensor::randn({B, T, s.C}, 72), g2 = Tensor::randn({B, T, s.C}, 73);
      struct Result {
        std::vector<double> out, dw, dpos;
        std::vector<std::string> forward, backward;
      };
      auto run = [&](bool fused) {
        Tensor w = w0.to(kEmu).set_requires_grad(true), pos = p0.to(kEmu).set_requires_grad(true);
        Result r;
        for (const Tensor& g : {g1, g2}) {
          KernelProfile prof(kEmu);
          prof.start();
          Tensor out =
              fused ? embedding_positions(w, ids, pos, s.first, t) : add_positions(embedding(w, ids), pos, s.first, t);
          prof.stop();
          for (const KernelCall& c : prof.calls()) r.forward.push_back(c.name);
          KernelProfile back(kEmu);
          back.start();
          out.backward(on_emu(g, t));
          back.stop();
          for (const KernelCall& c : back.calls()) r.backward.push_back(c.name);
          r.out = values(out.to(kCPU));
        }
        r.dw = values(w.grad().to(kCPU));
        r.dpos = values(pos.grad().to(kCPU));
        return r;
      };
      const Result fused = run(true), composed = run(false);
      CHECK(fused.out == composed.out);
      CHECK(fused.dw == composed.dw);
      CHECK_CLOSE(fused.dpos, composed.dpos, 1e-6, 1e-6);
      CHECK(fused.forward == std::vector<std::string>{"embedding_positions_forward", "embedding_positions_forward"});
      for (const std::string& k : fused.backward) CHECK(k != "cast_storage");
      CHECK(std::count(composed.backward.begin(), composed.backward.end(), "cast_storage") > 0);
      // And against the cpu: the fp32 composition of the rounded gradients, the sum rounded to t.
      Tensor wr = w0.detach().set_requires_grad(true), pr = p0.detach().set_requires_grad(true);
      const Tensor idc = ids.to(kCPU);
      for (const Tensor& g : {g1, g2})
        add_positions(embedding(wr, idc), pr, s.first, DType::f32).backward(rounded(g, t));
      const Tol f32 = tol_for(DType::f32);
      CHECK_CLOSE(fused.dw, values(wr.grad()), f32.atol, f32.rtol);
      CHECK_CLOSE(fused.dpos, values(pr.grad()), f32.atol, f32.rtol);
    }
  const Tensor w = Tensor::randn({4, 8}, 1).to(kEmu), pos = Tensor::randn({3, 8}, 2).to(kEmu);
  CHECK_THROWS_WITH(embedding_positions(w, Tensor::from_ints({1, 4}, {1, 2}, kEmu), pos, 0, DType::bf16),
                    Catch::Contains("embedding_positions: id 4 at position 1 outside the vocabulary [0, 4)"));
  CHECK_THROWS_WITH(embedding_positions(w, Tensor::from_ints({1, 2, 3, 0}, {1, 4}, kEmu), pos, 0, DType::bf16),
                    Catch::Contains("embedding_positions: positions 0..3 outside the table's 3 rows"));
}
