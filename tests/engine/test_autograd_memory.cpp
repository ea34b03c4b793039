// Activation checkpointing (eng::checkpoint) and the release of saved
// activations: the two autograd features whose whole point is memory, so the
// tests check both the gradients (against running the same block directly)
// and what is still alive (storage weak_ptrs and the allocator's counters).
#include <memory>

#include "tests/test_util.h"

using namespace eng;
using test::leaf;
using test::values;

namespace {

// A block with parameters captured from outside (not checkpoint inputs), a
// saved-input nonlinearity and a fixed-seed dropout, plus a second input.
struct Block {
  Tensor w1 = leaf({4, 6}, 101), b1 = leaf({6}, 102), w2 = leaf({4, 6}, 103);
  std::weak_ptr<Storage> hidden;  // storage of the first call's hidden activation
  bool first = true;

  Tensor operator()(const std::vector<Tensor>& in) {
    Tensor h = matmul(in[0], w1, Trans::N, Trans::N, b1);
    if (first) hidden = h.impl()->storage;
    first = false;
    Tensor a = dropout(gelu(h), 0.25, 99, 5);
    return add(linear(a, w2, Tensor()), in[1]);
  }
  std::vector<Tensor> params() const { return {w1, b1, w2}; }
};

void drop_grads(std::vector<Tensor> ts) {
  for (Tensor& t : ts) t.zero_grad();
}

}  // namespace

TEST_CASE("autograd: checkpoint gives the gradients of running the block directly", "[autograd]") {
  Block blk;
  auto fn = [&](const std::vector<Tensor>& in) { return blk(in); };
  for (bool r_needs_grad : {true, false}) {
    INFO("second input requires grad: " << r_needs_grad);
    Tensor x = leaf({3, 4}, 105);
    Tensor r = Tensor::randn({3, 4}, 106, 1.f, DType::f64).set_requires_grad(r_needs_grad);
    std::vector<Tensor> all{x, r, blk.w1, blk.b1, blk.w2};

    Tensor y_direct = fn({x, r});
    sum(mul(y_direct, y_direct)).backward();
    std::vector<std::vector<double>> ref;
    for (const Tensor& t : all) ref.push_back(t.requires_grad() ? values(t.grad()) : std::vector<double>{});
    drop_grads(all);

    Tensor y_ckpt = checkpoint(fn, {x, r});
    CHECK(values(y_ckpt) == values(y_direct));
    sum(mul(y_ckpt, y_ckpt)).backward();
    for (size_t i = 0; i < all.size(); ++i) {
      INFO("tensor " << i);
      if (!all[i].requires_grad()) {
        CHECK_FALSE(all[i].grad().defined());
        continue;
      }
      REQUIRE(all[i].grad().defined());
      CHECK_CLOSE(values(all[i].grad()), ref[i], 1e-14, 1e-12);
    }
    drop_grads(all);
  }
}

TEST_CASE("autograd: checkpoint with no input requiring grad still reaches the parameters", "[autograd]") {
  Block blk;
  auto fn = [&](const std::vector<Tensor>& in) { return blk(in); };
  const Tensor x = Tensor::randn({2, 4}, 108, 1.f, DType::f64), r = Tensor::zeros({2, 4}, DType::f64);
  mean(fn({x, r})).backward();
  std::vector<std::vector<double>> ref;
  for (const Tensor& p : blk.params()) ref.push_back(values(p.grad()));
  drop_grads(blk.params());
  Tensor y = checkpoint(fn, {x, r});
  CHECK(y.requires_grad());
  mean(y).backward();
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(blk.params()[i].grad().defined());
    CHECK_CLOSE(values(blk.params()[i].grad()), ref[i], 1e-14, 1e-12);
  }
}

TEST_CASE("autograd: checkpoint keeps no activations of its block until backward", "[autograd]") {
  Block blk;
  auto fn = [&](const std::vector<Tensor>& in) { return blk(in); };
  const Tensor x = leaf({3, 4}, 110), r = Tensor::zeros({3, 4}, DType::f64);
  {
    Tensor y = fn({x, r});  // direct: gelu saved h, so it is still alive
    CHECK_FALSE(blk.hidden.expired());
  }
  CHECK(blk.hidden.expired());  // dropping the output frees the graph
  blk.first = true;
  Tensor y = checkpoint(fn, {x, r});
  CHECK(blk.hidden.expired());  // the checkpointed forward recorded nothing
  {
    NoGradGuard ng;  // under no_grad, checkpoint is just a call
    CHECK_FALSE(checkpoint(fn, {x, r}).requires_grad());
  }
  sum(y).backward();
  CHECK(x.grad().defined());
}

TEST_CASE("autograd: saved activations are released by backward", "[autograd]") {
  Tensor x = leaf({16, 12}, 111), w = leaf({12, 20}, 112), lw = leaf({20}, 113), lb = leaf({20}, 114);
  std::weak_ptr<Storage> saved;
  Tensor loss;
  {
    Tensor h = matmul(x, w);  // gelu saves h (a detached view of the same storage)
    saved = h.impl()->storage;
    loss = mean(layernorm(gelu(h), lw, lb));
  }
  CHECK_FALSE(saved.expired());  // only the tape holds h now
  loss.backward();
  CHECK(saved.expired());  // freed by backward while the loss is still alive

  // Nothing else leaks (e.g. a node kept alive by a cycle): after dropping the
  // loss and the gradients, the allocator is back where it started.
  drop_grads({x, w, lw, lb});
  loss = Tensor();
  CachingAllocator& a = allocator_for(kCPU);
  const size_t before = a.stats().current_bytes;
  size_t scalar_bytes = 0;
  {
    Tensor s = Tensor::empty({}, DType::f64);
    scalar_bytes = a.stats().current_bytes - before;
  }
  {
    Tensor l = mean(layernorm(gelu(matmul(x, w)), lw, lb));
    CHECK(a.stats().current_bytes > before + 16 * 20 * 8);  // activations are alive
    l.backward();
    drop_grads({x, w, lw, lb});
    CHECK(a.stats().current_bytes == before + scalar_bytes);  // just the loss itself
  }
  CHECK(a.stats().current_bytes == before);
}
