// zero1: ZeRO stage 1 in one page. Data parallel as examples/ddp.cpp, but
// AdamW's two moments (8 bytes a parameter in fp32, twice the weights) are
// split over the P ranks: each rank keeps them for 1/P of the parameters,
// its shard. A step:
//   1. backward on my rows of the batch;
//   2. reduce-scatter the flat gradient (averaged): I receive the average
//      of my shard only, half the traffic of an all-reduce;
//   3. AdamW on my shard of the flat weights, with my shard's moments;
//   4. all-gather the updated shards: every rank holds all the new weights.
// Every rank also trains the serial model on the whole batch with the
// engine's AdamW (engine/optim/adamw.cpp) and checks the weights, every step.
//   bash scripts/mpirun.sh -np 2 ./build/examples/zero1      (-np 1, 2, 3, 4, 6 or 8)
// At full strength: comm/zero.cpp (ZeroAdamW: shards inside the ddp buckets,
// gradient clipping over shards, 8-bit moments, checkpoints in the plain
// AdamW layout), built under --zero 1 in models/train/train.cpp.
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "engine/optim/optimizer.h"
#include "examples/example_util.h"

using namespace eng;
using example::max_diff;
using example::param;

namespace {
constexpr int64_t kBatch = 24, kIn = 12, kHidden = 40, kSteps = 8;
constexpr double kLr = 0.01, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kDecay = 0.1;

Tensor loss_of(const std::vector<Tensor>& p, const Tensor& x, const Tensor& target) {
  return mse_loss(linear(gelu(linear(x, p[0], p[1])), p[2], p[3]), target);
}

// Every parameter side by side in one flat buffer, padded to a multiple of P
// so each rank's shard has the same length.
struct Flat {
  std::vector<int64_t> offset;
  int64_t used = 0, total = 0, shard = 0;  // parameters; padded length; per rank
};
Flat layout(const std::vector<Tensor>& ps, int P) {
  Flat f;
  for (const Tensor& p : ps) f.offset.push_back(f.used), f.used += p.numel();
  f.total = (f.used + P - 1) / P * P;
  f.shard = f.total / P;
  return f;
}
void gather_into(Tensor& flat, const Flat& f, const std::vector<Tensor>& ts) {  // ts' values into flat
  for (size_t i = 0; i < ts.size(); ++i)
    flat.slice(f.offset[i], f.offset[i] + ts[i].numel()).copy_from(ts[i].reshape({-1}));
}
void scatter_from(const Tensor& flat, const Flat& f, std::vector<Tensor>& ps) {  // flat's values into ps
  for (size_t i = 0; i < ps.size(); ++i)
    ps[i].copy_from(flat.slice(f.offset[i], f.offset[i] + ps[i].numel()).reshape(ps[i].shape()));
}

int run(int argc, char** argv) {
  const comm::World& world = comm::init_world();
  const std::string bug = example::parse_break(
      argc, argv, "zero1", "usage: bash scripts/mpirun.sh -np P ./build/examples/zero1 [--break BUG]",
      {{"no_gather", "skip the all-gather: each rank keeps only its own shard's update"},
       {"wrong_shard",
        "AdamW writes my shard's update into the next rank's slice, so my own slice, which the "
        "all-gather sends, is never updated"}});
  const int P = world.size, r = world.rank;
  ENGINE_USER_CHECK(kBatch % P == 0, "the batch of ", kBatch, " rows does not divide by ", P,
                    " ranks; run with -np 1, 2, 3, 4, 6 or 8");
  auto dp = comm::make_communicator(comm::Group::world_group(), kCPU, comm::Backend::mpi);
  const int64_t b = kBatch / P;

  const std::vector<Tensor> init = {Tensor::randn({kHidden, kIn}, 1, 0.3f), Tensor::randn({kHidden}, 2, 0.1f),
                                    Tensor::randn({kIn, kHidden}, 3, 0.2f), Tensor::randn({kIn}, 4, 0.1f)};
  std::vector<Tensor> ps, serial;
  for (const Tensor& t : init) ps.push_back(param(t)), serial.push_back(param(t));
  AdamW reference({{serial, kDecay}}, kLr, kBeta1, kBeta2, kEps);

  const Flat f = layout(ps, P);
  Tensor grads = Tensor::zeros({f.total}), weights = Tensor::zeros({f.total});
  Tensor my_grad = Tensor::zeros({f.shard});
  gather_into(weights, f, ps);
  // My shard's moments: f.shard entries each, not f.total.
  std::vector<float> m(size_t(f.shard), 0.f), v(size_t(f.shard), 0.f);

  for (int64_t step = 1; step <= kSteps; ++step) {
    const Tensor x = Tensor::randn({kBatch, kIn}, 100 + step), target = Tensor::randn({kBatch, kIn}, 200 + step);
    // 1. backward on my rows.
    loss_of(ps, narrow(x, 0, r * b, b), narrow(target, 0, r * b, b)).backward();
    // 2. reduce-scatter: my shard of the averaged gradient (the padding is zeros).
    std::vector<Tensor> gs;
    for (const Tensor& p : ps) gs.push_back(p.grad());
    gather_into(grads, f, gs);
    // (The sum instead of the average would go almost unseen here: AdamW's
    // update, m / (sqrt(v) + eps), does not change when every gradient is
    // scaled alike, but for eps.)
    dp->reduce_scatter(grads, my_grad, comm::ReduceOp::avg).wait();
    // 3. AdamW (torch.optim.AdamW's update) on my shard of the weights, in place.
    const int64_t at = bug == "wrong_shard" ? (r + 1) % P : r;
    float* w = weights.data<float>() + at * f.shard;
    const float* g = my_grad.data<float>();
    const double bc1 = 1 - std::pow(kBeta1, double(step)), bc2 = 1 - std::pow(kBeta2, double(step));
    for (int64_t i = 0; i < f.shard; ++i) {
      m[i] = float(kBeta1 * m[i] + (1 - kBeta1) * g[i]);
      v[i] = float(kBeta2 * v[i] + (1 - kBeta2) * double(g[i]) * g[i]);
      const double wd = w[i] * (1 - kLr * kDecay);
      w[i] = float(wd - kLr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + kEps));
    }
    // 4. all-gather the shards in place: my shard is already where it belongs.
    Tensor mine = weights.slice(r * f.shard, (r + 1) * f.shard);
    if (bug != "no_gather") dp->all_gather(mine, weights).wait();
    scatter_from(weights, f, ps);
    for (Tensor& p : ps) p.zero_grad();

    // The serial run: the whole batch, the engine's AdamW on every parameter.
    const Tensor sloss = loss_of(serial, x, target);
    sloss.backward();
    reference.step();
    reference.zero_grad();
    double worst = 0;
    for (size_t i = 0; i < ps.size(); ++i) worst = std::fmax(worst, max_diff(ps[i], serial[i]));
    // 1e-4, not 1e-5: at step 1 AdamW moves a weight by lr g / (|g| + eps),
    // which turns a gradient near 0 summed in another order (the
    // reduce-scatter's) into a visibly different step.
    ENGINE_CHECK(worst < 1e-4, "rank ", r, " step ", step, ": a weight differs from the serial run's by ", worst);
    if (r == 0)
      std::printf("step %lld  loss %.6f  largest weight difference %.1e\n", (long long)step, sloss.item(), worst);
  }
  if (r == 0)
    std::printf(
        "ok: %d rank(s) equal the serial AdamW; each keeps the moments of %lld of %lld parameters "
        "(%.0f bytes instead of %.0f)\n",
        P, (long long)f.shard, (long long)f.used, 8.0 * double(f.shard), 8.0 * double(f.used));
  comm::finalize_world();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return example::run_main("zero1", [&] { return run(argc, argv); });
}
