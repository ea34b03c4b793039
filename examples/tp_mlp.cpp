// tp_mlp: tensor parallelism in one page. A two-layer MLP, y = gelu(x W1^T +
// b1) W2^T + b2, split over the ranks as Megatron-LM splits a transformer's
// MLP: W1 by its output features (column parallel: each rank computes a
// slice of the hidden layer, no communication), W2 by its input features
// (row parallel: each rank's product is a partial sum of y, one all-reduce
// adds them). Every rank also computes the serial MLP from the full weights
// and checks the output and the gradients against it, then both train side
// by side with plain SGD and print their losses.
//   bash scripts/mpirun.sh -np 2 ./build/examples/tp_mlp      (-np 1, 2, 4 or 8)
// Things to change and watch fail: split W2 by rows instead of columns; drop
// copy_to_tp (the input's gradient is then a partial sum: --break
// no_copy_to_tp); add b2 before the all-reduce (it is then added P times:
// --break bias_before_reduce). docs/README.md has more.
// At full strength: comm/tp_layers.cpp (ColumnParallelLinear,
// RowParallelLinear) in GPT-2's and the Llama's blocks (models/gpt2/gpt2_tp.cpp,
// models/llama/llama_tp.cpp), which models/train/train.cpp builds under --tp.
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "comm/tp_mappings.h"
#include "comm/world.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "examples/example_util.h"

using namespace eng;
using example::max_diff;
using example::param;

namespace {
constexpr int64_t kBatch = 32, kIn = 16, kHidden = 64, kSteps = 30;
constexpr double kLr = 0.1;

int run(int argc, char** argv) {
  const comm::World& world = comm::init_world();
  const std::string bug = example::parse_break(
      argc, argv, "tp_mlp", "usage: bash scripts/mpirun.sh -np P ./build/examples/tp_mlp [--break BUG]",
      {{"no_copy_to_tp", "the input goes to the column-parallel layer without copy_to_tp"},
       {"bias_before_reduce", "b2 is added to each rank's partial sum, before the all-reduce"}});
  const int P = world.size, r = world.rank;
  ENGINE_USER_CHECK(kHidden % P == 0, "the hidden width ", kHidden, " does not divide by ", P,
                    " ranks; run with -np 1, 2, 4 or 8");
  auto tp = comm::make_communicator(comm::Group::world_group(), kCPU, comm::Backend::mpi);
  const int64_t h = kHidden / P;  // hidden features per rank

  // The full weights, the same on every rank (seeded), as a checkpoint holds them.
  const Tensor W1 = Tensor::randn({kHidden, kIn}, 1, 0.3f), b1 = Tensor::randn({kHidden}, 2, 0.1f);
  const Tensor W2 = Tensor::randn({kIn, kHidden}, 3, 0.3f), b2 = Tensor::randn({kIn}, 4, 0.1f);
  const Tensor x = Tensor::randn({kBatch, kIn}, 5), target = Tensor::randn({kBatch, kIn}, 6);

  // This rank's shards: rows [r h, (r + 1) h) of W1 and b1 (its hidden
  // features), the same columns of W2 (the inputs those features feed).
  Tensor w1 = param(narrow(W1, 0, r * h, h)), c1 = param(narrow(b1, 0, r * h, h));
  Tensor w2 = param(narrow(W2, 1, r * h, h)), c2 = param(b2);
  // The serial model, whole, on every rank: the reference.
  Tensor sw1 = param(W1), sc1 = param(b1), sw2 = param(W2), sc2 = param(b2);

  for (int64_t step = 0; step < kSteps; ++step) {
    Tensor xin = param(x);  // a leaf, so both runs' input gradients can be compared
    Tensor sxin = param(x);
    // Tensor parallel. copy_to_tp: identity forward; backward all-reduces the
    // input's gradient, since every rank's slice of the hidden layer
    // contributed to it. reduce_from_tp: all-reduce forward (sum of the
    // partial products), identity backward: every rank then holds the same
    // y and computes the same whole loss, so each needs y's gradient once,
    // not a share of it (no 1/P anywhere). The bias b2 is added once, after.
    const Tensor in = bug == "no_copy_to_tp" ? xin : comm::copy_to_tp(xin, *tp);
    const Tensor hid = gelu(linear(in, w1, c1));  // (B, h): my hidden slice
    const Tensor y = bug == "bias_before_reduce" ? comm::reduce_from_tp(linear(hid, w2, c2), *tp)
                                                 : add_bias(comm::reduce_from_tp(linear(hid, w2), *tp), c2);
    const Tensor loss = mse_loss(y, target);
    // Serial.
    const Tensor sy = linear(gelu(linear(sxin, sw1, sc1)), sw2, sc2);
    const Tensor sloss = mse_loss(sy, target);
    loss.backward();
    sloss.backward();

    // My shards' gradients are slices of the serial ones; the input's is whole.
    const double dy = max_diff(y, sy), dx = max_diff(xin.grad(), sxin.grad());
    const double dw1 = max_diff(w1.grad(), narrow(sw1.grad(), 0, r * h, h));
    const double dw2 = max_diff(w2.grad(), narrow(sw2.grad(), 1, r * h, h));
    const double db = std::fmax(max_diff(c1.grad(), narrow(sc1.grad(), 0, r * h, h)), max_diff(c2.grad(), sc2.grad()));
    const double worst = std::fmax(std::fmax(std::fmax(dy, dx), std::fmax(dw1, dw2)), db);
    ENGINE_CHECK(worst < 1e-5, "rank ", r, " step ", step, " differs from the serial MLP: y ", dy, ", dx ", dx,
                 ", dW1 ", dw1, ", dW2 ", dw2, ", the biases ", db);
    if (r == 0 && step % 5 == 0)
      std::printf("step %2lld  loss: tp %.6f  serial %.6f  (largest difference in y and gradients %.1e)\n",
                  (long long)step, loss.item(), sloss.item(), worst);
    example::sgd({w1, c1, w2, c2}, kLr);
    example::sgd({sw1, sc1, sw2, sc2}, kLr);
  }
  if (r == 0)
    std::printf("ok: %d rank(s), each holding %lld of %lld hidden features, equal the serial MLP\n", P, (long long)h,
                (long long)kHidden);
  comm::finalize_world();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return example::run_main("tp_mlp", [&] { return run(argc, argv); });
}
