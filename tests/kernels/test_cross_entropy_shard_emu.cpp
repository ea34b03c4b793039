// cross_entropy_sharded (engine/ops/cross_entropy_sharded.cpp; kernels
// cpu/cross_entropy_shard.cpp and cuda/cross_entropy_shard.cu) as one shard
// holding a padded vocabulary, against cross_entropy over the real columns:
// the same loss, the same dlogits on real columns and exact zeros on the
// padding, on the cpu and on emu (f32, bf16; tolerances of emu_check.h),
// with ignored rows and an incoming gradient other than 1; finite
// differences in f64; a padded id as a target is an error. Several shards
// under mpirun: tests/dist/dist_tp.cpp.
#include <tuple>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
constexpr int32_t kIgnore = -100;

Tensor targets_for(int64_t N, int64_t vocab, Device dev) {
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) t[size_t(r)] = r % 4 == 1 ? kIgnore : int32_t((r * 5 + 2) % vocab);
  return Tensor::from_ints(t, {N}, dev);
}

using Inputs = std::vector<Tensor>;
const ShardReduceFn kOneShard = [](Tensor&, ShardReduce) {};

}  // namespace

TEST_CASE("cross_entropy_sharded: one padded shard equals cross_entropy over the real ids", "[emu][kernels]") {
  for (Device dev : {kCPU, kEmu})
    for (DType t : {DType::f32, DType::bf16}) {
      if (dev == kCPU && t != DType::f32) continue;
      for (const auto& [N, vocab, padded] : {std::tuple<int64_t, int64_t, int64_t>{1, 3, 8}, {9, 97, 128}, {6, 40, 40}})
        for (double g : {1.0, 2.5}) {
          INFO(dev.str() << " " << dtype_name(t) << " N " << N << " vocab " << vocab << " padded " << padded << " g "
                         << g);
          const Tensor x = Tensor::randn({N, padded}, uint64_t(N * 100 + vocab), 2.f);
          Tensor xr = rounded(narrow(x, 1, 0, vocab), t).set_requires_grad(true);
          Tensor ref = cross_entropy(xr, targets_for(N, vocab, kCPU), kIgnore);
          ref.backward(Tensor::full({}, g, DType::f32));
          Tensor xs = x.detach().to(t).to(dev).detach().set_requires_grad(true);
          Tensor out = cross_entropy_sharded(xs, targets_for(N, vocab, dev), {0, vocab}, kOneShard, kIgnore);
          out.backward(Tensor::full({}, g, t, dev));
          CHECK_EMU_CLOSE(out, ref, t);
          CHECK_EMU_CLOSE(narrow(xs.grad(), 1, 0, vocab), xr.grad(), t);
          if (padded > vocab)
            CHECK(values(narrow(xs.grad(), 1, vocab, padded - vocab).to(kCPU)) ==
                  std::vector<double>(size_t(N * (padded - vocab)), 0.0));
        }
    }
}

TEST_CASE("gradcheck: cross_entropy_sharded over a padded shard, with ignored rows", "[gradcheck]") {
  const Tensor targets = targets_for(5, 6, kCPU);
  CHECK_GRADCHECK(
      [&](const Inputs& x) {
        return cross_entropy_sharded(x[0], targets, {0, 6}, kOneShard, kIgnore);
      },
      {leaf({5, 8}, 70, 2.f)});
}

TEST_CASE("cross_entropy_sharded: a padded id as a target is a one-line error", "[kernels]") {
  const Tensor x = Tensor::randn({2, 8}, 1);
  CHECK_THROWS_WITH(cross_entropy_sharded(x, Tensor::from_ints({1, 6}, {2}), {0, 6}, kOneShard),
                    Catch::Contains("target 6 at row 1 outside the vocabulary [0, 6)"));
}
