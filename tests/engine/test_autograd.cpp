// The autograd tape's contract (engine/autograd.h): accumulation into .grad,
// fan-out, no_grad, freeing the graph, final-gradient hooks, checkpointing and
// releasing saved activations. Expected gradients come from closed forms
// (d/dx sum(x*w) = w, d/dx sum(x*x) = 2x) or from a second, independent run.
#include <memory>

#include "base/error.h"
#include "engine/nn/layers.h"
#include "tests/test_util.h"

using namespace eng;
using test::leaf;
using test::values;

namespace {

std::vector<double> scaled(std::vector<double> v, double s) {
  for (double& x : v) x *= s;
  return v;
}

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// Counts how often a leaf's final hook fires and keeps the gradient it saw.
struct HookProbe {
  int calls = 0;
  std::vector<double> seen;
  void attach(Tensor& t) {
    t.add_final_grad_hook([this](Tensor& g) {
      ++calls;
      seen = values(g);
    });
  }
};

}  // namespace

TEST_CASE("autograd: gradients accumulate over backward calls", "[autograd]") {
  Tensor x = leaf({3, 5}, 1), w = leaf({3, 5}, 2);
  sum(mul(x, w)).backward();
  CHECK_CLOSE(values(x.grad()), values(w), 0, 1e-15);  // d/dx sum(x*w) = w
  sum(mul(x, w)).backward();
  CHECK_CLOSE(values(x.grad()), scaled(values(w), 2), 0, 1e-15);
  CHECK_CLOSE(values(w.grad()), scaled(values(x), 2), 0, 1e-15);

  // Through a nonlinear graph: two calls give exactly twice one call.
  Tensor y = leaf({2, 7}, 3), v = leaf({7, 3}, 4);
  auto loss = [&] { return mean(gelu(matmul(y, v))); };
  loss().backward();
  const std::vector<double> once = values(y.grad());
  y.zero_grad();
  CHECK_FALSE(y.grad().defined());
  loss().backward();
  loss().backward();
  CHECK_CLOSE(values(y.grad()), scaled(once, 2), 1e-15, 1e-12);
}

TEST_CASE("autograd: a tensor used several times gets the summed gradient", "[autograd]") {
  Tensor x = leaf({4, 3}, 5);
  sum(mul(x, x)).backward();
  CHECK_CLOSE(values(x.grad()), scaled(values(x), 2), 0, 1e-15);

  // Three uses through different ops meeting at one scalar: 2 + 3 - 1 = 4.
  Tensor z = leaf({2, 3}, 6);
  add(add(sum(scale(z, 2)), sum(scale(z, 3))), scale(sum(z), -1)).backward();
  CHECK_CLOSE(values(z.grad()), std::vector<double>(6, 4.0), 0, 1e-15);

  // A non-leaf used twice (h feeds both operands of mul): d/dx sum((2x)^2) = 8x.
  Tensor u = leaf({5}, 7);
  Tensor h = scale(u, 2);
  sum(mul(h, h)).backward();
  CHECK_CLOSE(values(u.grad()), scaled(values(u), 8), 0, 1e-14);
}

// Backward keeps a gradient it alone holds (as a leaf's .grad, or adding the
// next contribution into it) instead of copying it; one the caller or another
// node can still see must stay as it was.
TEST_CASE("autograd: gradients the caller holds are never kept or added into", "[autograd]") {
  Tensor x = leaf({2, 3}, 10), s = leaf({2, 3}, 11);
  const std::vector<double> s0 = values(s);
  Tensor seed = s.detach();

  // The seed reaches x through reshape's backward (a view of it): copied.
  x.reshape({3, 2}).backward(seed.reshape({3, 2}));
  CHECK(values(x.grad()) == s0);
  add_(seed, Tensor::full({2, 3}, 1.0, seed.dtype()));  // the caller changes its tensor afterwards
  CHECK(values(x.grad()) == s0);
  add_(seed, Tensor::full({2, 3}, -1.0, seed.dtype()));
  x.zero_grad();

  // The seed passes through add to h, then h's second contribution arrives:
  // added into a new tensor, not into the seed. d/dx of (h + 3h), h = 2x: 8.
  Tensor h = scale(x, 2);
  add(h, scale(h, 3)).backward(seed);
  CHECK_CLOSE(values(seed), s0, 0, 1e-6);
  CHECK_CLOSE(values(x.grad()), scaled(s0, 8), 0, 1e-5);

  // A leaf as the root: its gradient is a copy of the seed.
  x.zero_grad();
  x.backward(seed);
  add_(seed, seed);
  CHECK(values(x.grad()) == s0);
}

TEST_CASE("autograd: NoGradGuard records nothing", "[autograd]") {
  Tensor x = leaf({3}, 8), w = leaf({3}, 9);
  Tensor y;
  {
    NoGradGuard ng;
    CHECK_FALSE(grad_enabled());
    y = gelu(mul(x, w));
    {
      EnableGradGuard eg;  // re-enabled inside, restored on exit
      CHECK(grad_enabled());
      CHECK(mul(x, w).requires_grad());
    }
    CHECK_FALSE(grad_enabled());
  }
  CHECK(grad_enabled());
  CHECK_FALSE(y.requires_grad());
  CHECK(y.is_leaf());
  CHECK_FALSE(sum(y).requires_grad());
  CHECK_THROWS_AS(sum(y).backward(), Error);
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("backward") && Catch::Contains("does not require grad"));
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("autograd: a second backward through a freed graph throws", "[autograd]") {
  Tensor x = leaf({2, 3}, 10), w = leaf({3, 4}, 11);
  Tensor loss = sum(gelu(matmul(x, w)));
  loss.backward();
  const std::vector<double> g = values(x.grad());
  CHECK_THROWS_AS(loss.backward(), Error);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("already freed") && Catch::Contains("sum"));
  CHECK(values(x.grad()) == g);  // the failed calls added nothing
  // A non-scalar root needs its gradient spelled out.
  CHECK_THROWS_WITH(gelu(x).backward(), Catch::Contains("non-scalar") && Catch::Contains("(2, 3)"));
}

TEST_CASE("autograd: the final-gradient hook fires once, after every contribution", "[autograd]") {
  // p reaches the loss through a long branch (matmul -> gelu -> sum) and a
  // short one (mul -> sum); the hook must see both contributions.
  Tensor x = leaf({2, 3}, 12), p = leaf({3, 3}, 13);
  auto long_branch = [&] { return sum(gelu(matmul(x, p))); };
  auto short_branch = [&] { return sum(mul(p, p)); };
  long_branch().backward();
  const std::vector<double> g_long = values(p.grad());
  p.zero_grad();
  short_branch().backward();
  const std::vector<double> g_short = values(p.grad());
  p.zero_grad();

  HookProbe probe, unused_probe;
  probe.attach(p);
  Tensor unused = leaf({2}, 14);
  unused_probe.attach(unused);
  add(long_branch(), short_branch()).backward();
  CHECK(probe.calls == 1);
  CHECK_CLOSE(probe.seen, values(p.grad()), 0, 0);
  CHECK_CLOSE(probe.seen, plus(g_long, g_short), 1e-14, 1e-12);
  CHECK(unused_probe.calls == 0);  // not reached by this backward

  // Branch order reversed in the graph: still once, still complete.
  p.zero_grad();
  add(short_branch(), long_branch()).backward();
  CHECK(probe.calls == 2);
  CHECK_CLOSE(probe.seen, plus(g_long, g_short), 1e-14, 1e-12);

  // A second backward without zeroing: the hook sees the accumulated total.
  add(short_branch(), long_branch()).backward();
  CHECK(probe.calls == 3);
  CHECK_CLOSE(probe.seen, scaled(plus(g_long, g_short), 2), 1e-14, 1e-12);

  // Backward from the leaf itself (a scalar parameter used as the loss).
  Tensor s = leaf({}, 15);
  HookProbe sp;
  sp.attach(s);
  s.backward();
  CHECK(sp.calls == 1);
  CHECK(sp.seen == std::vector<double>{1.0});
}

TEST_CASE("autograd: final-gradient hooks fire for every parameter of an MLP", "[autograd]") {
  InitOptions init;
  init.seed = 3;
  MLP mlp(4, 8, 3, Activation::gelu, init);
  std::vector<Tensor> params = mlp.parameters();
  REQUIRE(params.size() == 4);  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  std::vector<HookProbe> probes(params.size());
  for (size_t i = 0; i < params.size(); ++i) probes[i].attach(params[i]);
  const Tensor x = Tensor::randn({5, 4}, 16), target = Tensor::randn({5, 3}, 17);
  mse_loss(mlp.forward(x), target).backward();
  for (size_t i = 0; i < params.size(); ++i) {
    INFO("parameter " << mlp.named_parameters()[i].first);
    CHECK(probes[i].calls == 1);
    CHECK(probes[i].seen == values(params[i].grad()));
  }
}

TEST_CASE("autograd: a parameter inside a checkpoint gets one final hook, after all contributions", "[autograd]") {
  // w is used inside the checkpointed block and again outside it, as a tied
  // embedding is; the hook may fire only once the outer use has been added.
  Tensor x = leaf({3, 4}, 18), w = leaf({4, 4}, 19);
  auto block = [&](const std::vector<Tensor>& in) { return gelu(matmul(in[0], w)); };
  auto loss = [&](bool ckpt) {
    Tensor h = ckpt ? checkpoint(block, {x}) : block({x});
    return sum(matmul(h, w, Trans::N, Trans::T));
  };
  loss(false).backward();
  const std::vector<double> ref = values(w.grad());
  w.zero_grad();
  HookProbe probe;
  probe.attach(w);
  loss(true).backward();
  CHECK(probe.calls == 1);
  CHECK_CLOSE(values(w.grad()), ref, 1e-14, 1e-12);
  CHECK_CLOSE(probe.seen, ref, 1e-14, 1e-12);

  // Two checkpoints sharing every parameter of an MLP (a weight-shared layer
  // applied twice), with the checkpoint input itself a hooked leaf.
  InitOptions init;
  init.seed = 4;
  init.dtype = DType::f64;
  MLP mlp(4, 5, 4, Activation::relu, init);
  auto layer = [&](const std::vector<Tensor>& in) { return mlp.forward(in[0]); };
  auto deep = [&](bool ckpt) {
    Tensor h1 = ckpt ? checkpoint(layer, {x}) : layer({x});
    Tensor h2 = ckpt ? checkpoint(layer, {h1}) : layer({h1});
    return mean(mul(h2, h2));
  };
  std::vector<Tensor> all = mlp.parameters();
  all.push_back(x);
  x.zero_grad();
  deep(false).backward();
  std::vector<std::vector<double>> refs;
  for (Tensor& t : all) {
    refs.push_back(values(t.grad()));
    t.zero_grad();
  }
  std::vector<HookProbe> probes(all.size());
  for (size_t i = 0; i < all.size(); ++i) probes[i].attach(all[i]);
  deep(true).backward();
  for (size_t i = 0; i < all.size(); ++i) {
    INFO("tensor " << i);
    CHECK(probes[i].calls == 1);
    CHECK_CLOSE(probes[i].seen, refs[i], 1e-14, 1e-12);
  }
}
