// cp_attention: context-parallel causal self-attention in one page. The
// sequence is cut into P slices, rank r holding positions [r T/P, (r+1) T/P)
// of every sample. Projections are per token, so they need nothing from the
// others; attention does: my queries must see every key before them. So:
//   q, k, v = my tokens' projections            (B, T/P, NH, HS) each
//   K, V    = k and v all-gathered, rank order  (B, T, NH, HS)
//   a       = attention(q, K, V) with my queries at positions r T/P ...: the
//             causal mask is against the whole sequence, not my slice;
//   y       = a Wo^T + bo on my tokens.
// Backward: every rank's queries used my keys, so my k's gradient is the sum
// over ranks of what each sent back for my slice: the all-gather's adjoint
// is a reduce-scatter (gather_seq below writes both). Each rank back-
// propagates the mean loss of its tokens; averaging the weights' gradients
// over the ranks then gives the gradient of the whole sequence's mean loss.
// Every rank checks its rows of y and the averaged gradients against the
// serial attention over the whole sequence.
//   bash scripts/mpirun.sh -np 2 ./build/examples/cp_attention    (-np 1, 2, 4 or 8)
// At full strength: comm/cp_mappings.cpp (gather_seq_from_cp, cp_attention,
// packed qkv) in GPT-2's and the Llama's blocks (with the rotary offsets of
// each slice), built by models/train/train.cpp under --cp.
#include <cstdio>
#include <vector>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "engine/autograd.h"
#include "examples/example_util.h"

using namespace eng;
using example::max_diff;
using example::param;

namespace {
constexpr int64_t kB = 2, kT = 32, kNH = 2, kHS = 8, kC = kNH * kHS, kSteps = 5;
constexpr double kLr = 0.05;

// (B, Tl, NH, HS) on each rank -> (B, P Tl, NH, HS), rank r's rows at [r Tl, (r+1) Tl).
// An op of our own: the forward runs on detached tensors (autograd records
// none of it), then record() hangs one node on `out` whose backward is the
// lambda: what autograd calls with out's gradient to get x's. The backward
// sums over the ranks (not averages): each rank back-propagates its own
// loss, and the objective is their sum until the weights' gradients are
// averaged once, in run() below.
Tensor gather_seq(const Tensor& x, comm::Communicator& cp) {
  const int64_t P = cp.size(), B = x.size(0), Tl = x.size(1), R = x.numel() / (B * Tl);
  Tensor all = Tensor::empty({P * x.numel()});  // rank-major: (P, B, Tl R)
  cp.all_gather(x.detach().reshape({-1}), all).wait();
  Tensor out = permute(all.reshape({P, B, Tl * R}), {1, 0, 2}).reshape({B, P * Tl, x.size(2), x.size(3)});
  comm::Communicator* c = &cp;
  record("gather_seq", out, {x}, [c, P, B, Tl, R, xs = x.shape()](const Tensor& g, const std::vector<bool>&) {
    // g: (B, P Tl, ...), every rank's gradient for the whole sequence. Back
    // to rank-major, then summed over ranks, each keeping its own slice.
    const Tensor by_rank = permute(g.reshape({B, P, Tl * R}), {1, 0, 2}).reshape({-1});
    Tensor mine = Tensor::empty({B * Tl * R});
    c->reduce_scatter(by_rank, mine, comm::ReduceOp::sum).wait();
    return std::vector<Tensor>{mine.reshape(xs)};
  });
  return out;
}

// The attention block on tokens at positions [first, first + x.size(1)): with
// a cp group, their keys and values gathered from every rank; without, x's own.
Tensor block(const std::vector<Tensor>& p, const Tensor& x, comm::Communicator* cp, int64_t first) {
  const int64_t Tl = x.size(1);
  const std::vector<Tensor> qkv = split(linear(x, p[0], p[1]), {kC, kC, kC}, 2);
  const Tensor q = qkv[0].reshape({kB, Tl, kNH, kHS});
  Tensor k = qkv[1].reshape({kB, Tl, kNH, kHS}), v = qkv[2].reshape({kB, Tl, kNH, kHS});
  if (cp) k = gather_seq(k, *cp), v = gather_seq(v, *cp);
  const Tensor a = attention(q, k, v, Causal::yes, AttentionImpl::ours, first);
  return linear(a.reshape({kB, Tl, kC}), p[2], p[3]);
}

int run(int argc, char** argv) {
  const comm::World& world = comm::init_world();
  const std::string bug = example::parse_break(
      argc, argv, "cp_attention", "usage: bash scripts/mpirun.sh -np P ./build/examples/cp_attention [--break BUG]",
      {{"no_offset", "my queries are masked as if they were the sequence's first positions"},
       {"no_average", "the weights' gradients are not averaged over the ranks"}});
  const int P = world.size, r = world.rank;
  ENGINE_USER_CHECK(kT % P == 0, "the ", kT, " positions do not divide by ", P, " ranks; run with -np 1, 2, 4 or 8");
  auto cp = comm::make_communicator(comm::Group::world_group(), kCPU, comm::Backend::mpi);
  const int64_t Tl = kT / P;

  const std::vector<Tensor> init = {Tensor::randn({3 * kC, kC}, 1, 0.3f), Tensor::randn({3 * kC}, 2, 0.1f),
                                    Tensor::randn({kC, kC}, 3, 0.3f), Tensor::randn({kC}, 4, 0.1f)};
  std::vector<Tensor> ps, serial;
  for (const Tensor& t : init) ps.push_back(param(t)), serial.push_back(param(t));

  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor x = Tensor::randn({kB, kT, kC}, 10 + step), target = Tensor::randn({kB, kT, kC}, 20 + step);
    // My slice of the sequence, and its loss.
    const Tensor y = block(ps, narrow(x, 1, r * Tl, Tl), &*cp, bug == "no_offset" ? 0 : r * Tl);
    mse_loss(y, narrow(target, 1, r * Tl, Tl)).backward();
    for (Tensor& p : ps) {
      Tensor g = p.grad();
      if (bug != "no_average") cp->all_reduce(g, comm::ReduceOp::avg).wait();
    }
    // Serial: the whole sequence on one rank.
    const Tensor sy = block(serial, x, nullptr, 0);
    const Tensor sloss = mse_loss(sy, target);
    sloss.backward();

    double worst = max_diff(y, narrow(sy, 1, r * Tl, Tl));
    for (size_t i = 0; i < ps.size(); ++i) worst = std::fmax(worst, max_diff(ps[i].grad(), serial[i].grad()));
    ENGINE_CHECK(worst < 1e-5, "rank ", r, " step ", step, ": y or a gradient differs from the serial attention by ",
                 worst);
    if (r == 0)
      std::printf("step %lld  serial loss %.6f  (largest difference in my rows and the gradients %.1e)\n",
                  (long long)step, sloss.item(), worst);
    example::sgd(ps, kLr);
    example::sgd(serial, kLr);
  }
  if (r == 0)
    std::printf("ok: %d rank(s), %lld of %lld positions each, equal the serial attention\n", P, (long long)Tl,
                (long long)kT);
  comm::finalize_world();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return example::run_main("cp_attention", [&] { return run(argc, argv); });
}
