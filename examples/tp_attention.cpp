// tp_attention: tensor-parallel self-attention in one page, as Megatron-LM
// splits it. Heads are independent, so each rank takes NH / P of them:
//   qkv = x Wqkv^T + bqkv   column parallel: my heads' rows of the q, k and
//                           v blocks of Wqkv; no communication;
//   a   = attention(q, k, v) on my heads alone;
//   y   = a Wo^T + bo       row parallel: the columns of Wo that read my
//                           heads; each rank's product is a partial sum of
//                           y, one all-reduce adds them, then bo once.
// The trap: Wqkv is packed q | k | v (C rows each). My shard is three
// pieces of it, my heads' rows of each block, not 3C / P contiguous rows
// (--break contiguous_qkv takes those and the check catches it).
// Every rank runs the serial attention too and checks y and the gradients.
//   bash scripts/mpirun.sh -np 2 ./build/examples/tp_attention    (-np 1, 2 or 4)
// At full strength: comm/tp_layers.cpp (ColumnParallelLinear with blocks,
// `shard_blocks`) in models/gpt2/gpt2_tp.cpp (and the Llama's, whose K/V
// heads split with their query groups), built by models/train/train.cpp under --tp.
#include <cstdio>
#include <vector>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "comm/tp_mappings.h"
#include "examples/example_util.h"

using namespace eng;
using example::max_diff;
using example::param;

namespace {
constexpr int64_t kB = 2, kT = 16, kNH = 4, kHS = 8, kC = kNH * kHS, kSteps = 5;
constexpr double kLr = 0.05;

// Rows [r n, (r + 1) n) of each of the three C-row blocks of a packed q | k | v tensor, side by side.
Tensor my_qkv_rows(const Tensor& t, int r, int64_t n) {
  return concat({narrow(t, 0, r * n, n), narrow(t, 0, kC + r * n, n), narrow(t, 0, 2 * kC + r * n, n)}, 0);
}

// Attention over the heads qkv holds: (B, T, 3 h HS) -> (B, T, h HS).
Tensor attend(const Tensor& qkv, int64_t heads) {
  return attention_qkv(qkv, heads, Causal::yes).reshape({kB, kT, heads * kHS});
}

int run(int argc, char** argv) {
  const comm::World& world = comm::init_world();
  const std::string bug = example::parse_break(
      argc, argv, "tp_attention", "usage: bash scripts/mpirun.sh -np P ./build/examples/tp_attention [--break BUG]",
      {{"contiguous_qkv", "my shard of Wqkv is 3C / P contiguous rows, not my heads' rows of q, k and v"}});
  const int P = world.size, r = world.rank;
  ENGINE_USER_CHECK(kNH % P == 0, "the ", kNH, " heads do not divide by ", P, " ranks; run with -np 1, 2 or 4");
  auto tp = comm::make_communicator(comm::Group::world_group(), kCPU, comm::Backend::mpi);
  const int64_t h = kNH / P, n = h * kHS;  // my heads, my channels

  const Tensor Wqkv = Tensor::randn({3 * kC, kC}, 1, 0.2f), bqkv = Tensor::randn({3 * kC}, 2, 0.1f);
  const Tensor Wo = Tensor::randn({kC, kC}, 3, 0.2f), bo = Tensor::randn({kC}, 4, 0.1f);
  const auto shard = [&](const Tensor& t) {
    return bug == "contiguous_qkv" ? narrow(t, 0, r * 3 * n, 3 * n) : my_qkv_rows(t, r, n);
  };
  Tensor wqkv = param(shard(Wqkv)), cqkv = param(shard(bqkv)), wo = param(narrow(Wo, 1, r * n, n)), co = param(bo);
  Tensor swqkv = param(Wqkv), scqkv = param(bqkv), swo = param(Wo), sco = param(bo);

  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor x = Tensor::randn({kB, kT, kC}, 10 + step), target = Tensor::randn({kB, kT, kC}, 20 + step);
    Tensor xin = param(x), sxin = param(x);
    // Tensor parallel: copy_to_tp (identity; backward all-reduces x's
    // gradient), my heads, then reduce_from_tp (all-reduce; backward identity).
    const Tensor a = attend(linear(comm::copy_to_tp(xin, *tp), wqkv, cqkv), h);
    const Tensor y = add_bias(comm::reduce_from_tp(linear(a, wo), *tp), co);
    const Tensor loss = mse_loss(y, target);
    // Serial: every head.
    const Tensor sy = linear(attend(linear(sxin, swqkv, scqkv), kNH), swo, sco);
    const Tensor sloss = mse_loss(sy, target);
    loss.backward();
    sloss.backward();

    const double dy = max_diff(y, sy), dx = max_diff(xin.grad(), sxin.grad());
    const double dqkv = max_diff(wqkv.grad(), my_qkv_rows(swqkv.grad(), r, n));
    const double dwo = max_diff(wo.grad(), narrow(swo.grad(), 1, r * n, n));
    const double db =
        std::fmax(max_diff(cqkv.grad(), my_qkv_rows(scqkv.grad(), r, n)), max_diff(co.grad(), sco.grad()));
    const double worst = std::fmax(std::fmax(std::fmax(dy, dx), std::fmax(dqkv, dwo)), db);
    ENGINE_CHECK(worst < 1e-5, "rank ", r, " step ", step, " differs from the serial attention: y ", dy, ", dx ", dx,
                 ", dWqkv ", dqkv, ", dWo ", dwo, ", the biases ", db);
    if (r == 0)
      std::printf("step %lld  loss: tp %.6f  serial %.6f  (largest difference %.1e)\n", (long long)step, loss.item(),
                  sloss.item(), worst);
    example::sgd({wqkv, cqkv, wo, co}, kLr);
    example::sgd({swqkv, scqkv, swo, sco}, kLr);
  }
  if (r == 0)
    std::printf("ok: %d rank(s), %lld of %lld heads each, equal the serial attention\n", P, (long long)h,
                (long long)kNH);
  comm::finalize_world();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return example::run_main("tp_attention", [&] { return run(argc, argv); });
}
