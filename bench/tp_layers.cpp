// bench/tp_layers: forward + backward time of the tensor-parallel layers at
// tp = 1 and at tp = world size, side by side in one run:
//   bash scripts/mpirun.sh -np 2 ./build/bench/tp_layers [--device cpu] [--iters 20]
// tp = 1 runs the layer on each rank alone (a group of one: every rank busy,
// as in the tp run), tp = N splits it over the world. Layers, for GPT-2's
// shapes at width C and B T token rows:
//   column   ColumnParallelLinear C -> 4C   (c_fc: no communication forward)
//   row      RowParallelLinear 4C -> C      (c_proj: one all-reduce forward)
//   mlp      the two, with GELU             (one all-reduce each way)
//   vocab_ce the vocab-parallel cross-entropy of (B T, V) logits
// Time per call is the slowest rank's mean; the ratio tp1/tpN > 1 means the
// split layer is faster. Figures: docs/bench.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/tp_layers.h"
#include "comm/vocab_parallel.h"
#include "comm/world.h"
#include "engine/autograd.h"
#include "engine/ops.h"

using namespace eng;
using namespace eng::comm;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string device = "cpu";
  int iters = 20;
  bool quick = false;  // the smallest shapes, for CI (figures not read)
};

// Mean seconds per call of f over `iters` calls after one warm-up, the
// slowest rank's.
double time_it(const std::function<void()>& f, int iters, Device dev) {
  f();
  barrier_world();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  if (dev.type != DeviceType::cpu) (void)Tensor::zeros({1}, DType::f32, dev).to_vector();  // drain the stream
  const double mine = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  return all_reduce_host(mine, HostOp::max);
}

struct Row {
  std::string layer, shape;
  double t1, tn;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a;
    for (int i = 1; i < argc; ++i) {
      const std::string k = argv[i];
      ENGINE_CHECK(k == "--help" || k == "--quick" || i + 1 < argc, "tp_layers: ", k, " needs a value");
      if (k == "--device")
        a.device = argv[++i];
      else if (k == "--iters")
        a.iters = std::stoi(argv[++i]);
      else if (k == "--quick")
        a.quick = true;
      else if (k == "--help") {
        std::printf("usage: [mpirun -np N] tp_layers [--device cpu|emu|cuda] [--iters 20] [--quick]\n");
        return 0;
      } else
        ENGINE_CHECK(false, "tp_layers: unknown option ", k);
    }
    const World& w = init_world();
    const Device dev = Device::parse(a.device);
    const Backend backend = parse_backend("auto", dev);
    auto alone = make_communicator(Group(), dev, backend);
    auto tpn = make_communicator(Group::world_group(), dev, backend);
    const int P = tpn->size();
    std::vector<Row> rows;
    using Shape2 = std::vector<std::pair<int64_t, int64_t>>;
    const Shape2 widths = a.quick ? Shape2{{32, 64}} : Shape2{{256, 1024}, {512, 1024}, {768, 1024}};
    const Shape2 vocabs = a.quick ? Shape2{{256, 64}} : Shape2{{256, 1024}, {50304, 256}, {50304, 1024}};
    for (const auto& [C, BT] : widths) {
      if ((4 * C) % P != 0 || BT % P != 0) continue;
      const std::string shape = "C=" + std::to_string(C) + " BT=" + std::to_string(BT);
      const Tensor x = Tensor::randn({BT, C}, 1).to(dev), h = Tensor::randn({BT, 4 * C}, 2).to(dev);
      const Tensor gy = Tensor::randn({BT, C}, 3).to(dev), gh = Tensor::randn({BT, 4 * C}, 4).to(dev);
      const InitOptions i1{5, DType::f32, dev, 0.02f}, i2{6, DType::f32, dev, 0.02f};
      auto measure = [&](Communicator& tp) {
        ColumnParallelLinear col(C, 4 * C, Bias::yes, i1, tp);
        RowParallelLinear row(4 * C, C, Bias::yes, i2, tp);
        const Tensor hs = narrow(h, 1, tp.rank() * (4 * C / tp.size()), 4 * C / tp.size());
        const Tensor ghs = narrow(gh, 1, tp.rank() * (4 * C / tp.size()), 4 * C / tp.size());
        const Tensor xl = x.detach().clone().set_requires_grad(true);
        const Tensor hl = hs.detach().clone().set_requires_grad(true);
        const double tc = time_it([&] { col.forward(xl).backward(ghs); }, a.iters, dev);
        const double tr = time_it([&] { row.forward(hl).backward(gy); }, a.iters, dev);
        const double tm = time_it([&] { row.forward(col.forward_gelu(xl)).backward(gy); }, a.iters, dev);
        return std::vector<double>{tc, tr, tm};
      };
      const std::vector<double> one = measure(*alone), n = measure(*tpn);
      rows.push_back({"column C->4C", shape, one[0], n[0]});
      rows.push_back({"row 4C->C", shape, one[1], n[1]});
      rows.push_back({"mlp", shape, one[2], n[2]});
    }
    for (const auto& [V, N] : vocabs) {
      if (V % P != 0) continue;
      const std::string shape = "V=" + std::to_string(V) + " N=" + std::to_string(N);
      const Tensor logits = Tensor::randn({N, V}, 7).to(dev);
      std::vector<int32_t> tv(static_cast<size_t>(N));
      for (int64_t r = 0; r < N; ++r) tv[size_t(r)] = int32_t((r * 7919) % V);
      const Tensor tg = Tensor::from_ints(tv, {N}, dev);
      auto measure = [&](Communicator& tp) {
        const int64_t Vs = V / tp.size();
        const Tensor mine = narrow(logits, 1, tp.rank() * Vs, Vs).detach().set_requires_grad(true);
        return time_it([&] { vocab_parallel_cross_entropy(mine, tg, V, tp).backward(); }, a.iters, dev);
      };
      const double t1 = measure(*alone), tn = measure(*tpn);
      rows.push_back({"vocab_ce", shape, t1, tn});
    }
    if (w.rank == 0) {
      const char* threads = std::getenv("OMP_NUM_THREADS");
      std::printf("tp layers on %s, %d rank(s), OMP_NUM_THREADS=%s: forward + backward, ms per call\n",
                  dev.str().c_str(), P, threads ? threads : "unset");
      std::printf("%-14s %-16s %10s %10s %9s\n", "layer", "shape", "tp=1", ("tp=" + std::to_string(P)).c_str(),
                  "tp1/tpN");
      for (const Row& r : rows)
        std::printf("%-14s %-16s %10.3f %10.3f %9.2f\n", r.layer.c_str(), r.shape.c_str(), r.t1 * 1e3, r.tn * 1e3,
                    r.t1 / r.tn);
    }
    finalize_world();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_layers: error: %s\n", e.what());
    if (world().size > 1) abort_world(1);
    return 1;
  }
}
