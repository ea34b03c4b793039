// Finite-difference gradient checks (f64, central differences) for the compute
// ops in engine/ops.h: matmul/linear/linear_gelu, elementwise, activations, layernorm,
// softmax, attention (causal and not), the losses and embedding. The layout ops (permute,
// reductions, concat/split, dropout, views) are in test_gradcheck_layout.cpp.
// Each backward is compared with numbers obtained only from the forward pass,
// so a wrong backward formula cannot also be the reference.
#include <cmath>

#include "tests/test_util.h"

using namespace eng;
using test::leaf;
using Inputs = std::vector<Tensor>;

namespace {

// Moves every element at least 0.05 away from 0, so relu's kink (and gelu's
// steepest curvature change) never falls inside a +-eps finite difference.
Tensor away_from_zero(Tensor x) {
  double* p = x.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i)
    if (std::fabs(p[i]) < 0.05) p[i] = p[i] < 0 ? p[i] - 0.1 : p[i] + 0.1;
  return x;
}

const char* tname(Trans t) { return t == Trans::N ? "N" : "T"; }

}  // namespace

TEST_CASE("gradcheck: matmul, 2-D / batched / shared B, all transpose combos, with and without bias", "[gradcheck]") {
  // M = 1 exercises a single-row GEMM; K and N are odd so no dim is a power of two.
  for (int64_t M : {int64_t(1), int64_t(3)}) {
    const int64_t K = 4, N = 5;
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (int layout = 0; layout < 3; ++layout)  // 0: 2-D, 1: batched B, 2: 2-D B shared by a 3-D A
          for (bool with_bias : {false, true}) {
            const Shape a2 = ta == Trans::N ? Shape{M, K} : Shape{K, M};
            const Shape b2 = tb == Trans::N ? Shape{K, N} : Shape{N, K};
            Shape as = a2, bs = b2;
            if (layout >= 1) as.insert(as.begin(), 2);
            if (layout == 1) bs.insert(bs.begin(), 2);
            INFO("M " << M << " ta " << tname(ta) << " tb " << tname(tb) << " layout " << layout << " bias "
                      << with_bias);
            Inputs in{leaf(as, 1), leaf(bs, 2)};
            if (with_bias) in.push_back(leaf({N}, 3));
            CHECK_GRADCHECK([&](const Inputs& x) { return matmul(x[0], x[1], ta, tb, x.size() > 2 ? x[2] : Tensor()); },
                            in);
          }
  }
}

TEST_CASE("gradcheck: matmul with a 4-D A and a shared 2-D B", "[gradcheck]") {
  for (Trans ta : {Trans::N, Trans::T}) {
    INFO("ta " << tname(ta));
    const Shape as = ta == Trans::N ? Shape{2, 3, 2, 4} : Shape{2, 3, 4, 2};
    CHECK_GRADCHECK([&](const Inputs& x) { return matmul(x[0], x[1], ta, Trans::T, x[2]); },
                    {leaf(as, 4), leaf({3, 4}, 5), leaf({3}, 6)});
  }
}

TEST_CASE("gradcheck: linear on 1-D, 2-D and 3-D inputs, with and without bias", "[gradcheck]") {
  for (const Shape& xs : {Shape{4}, Shape{1, 4}, Shape{3, 4}, Shape{2, 3, 4}}) {
    INFO("x " << shape_str(xs));
    CHECK_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1], x[2]); },
                    {leaf(xs, 7), leaf({5, 4}, 8), leaf({5}, 9)});
    CHECK_GRADCHECK([](const Inputs& x) { return linear(x[0], x[1]); }, {leaf(xs, 10), leaf({5, 4}, 11)});
  }
}

TEST_CASE("gradcheck: linear_gelu on 1-D, 2-D and 3-D inputs", "[gradcheck]") {
  // Its backward (gelu' of the saved pre-activation, then matmul's backward)
  // against finite differences of its own forward, on the cpu in f64.
  for (const Shape& xs : {Shape{4}, Shape{1, 4}, Shape{3, 4}, Shape{2, 3, 4}}) {
    INFO("x " << shape_str(xs));
    CHECK_GRADCHECK([](const Inputs& x) { return linear_gelu(x[0], x[1], x[2]); },
                    {leaf(xs, 12), leaf({5, 4}, 13), leaf({5}, 14)});
  }
}

TEST_CASE("gradcheck: add, sub, mul, scale", "[gradcheck]") {
  const Shape s{3, 5};
  CHECK_GRADCHECK([](const Inputs& x) { return add(x[0], x[1]); }, {leaf(s, 1), leaf(s, 2)});
  CHECK_GRADCHECK([](const Inputs& x) { return sub(x[0], x[1]); }, {leaf(s, 3), leaf(s, 4)});
  CHECK_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, {leaf(s, 5), leaf(s, 6)});
  CHECK_GRADCHECK([](const Inputs& x) { return scale(x[0], -2.5); }, {leaf(s, 7)});
  // Only the second operand requires grad: the first one's gradient must not be needed.
  Tensor c = Tensor::randn(s, 8, 1.f, DType::f64);
  CHECK_GRADCHECK([](const Inputs& x) { return sub(x[0], x[1]); }, {c, leaf(s, 9)});
  CHECK_GRADCHECK([](const Inputs& x) { return mul(x[0], x[1]); }, {c, leaf(s, 10)});
  // The same tensor on both sides: x*x and x-x need both contributions summed.
  CHECK_GRADCHECK([](const Inputs& x) { return mul(x[0], x[0]); }, {leaf({7}, 11)});
  CHECK_GRADCHECK([](const Inputs& x) { return add(sub(x[0], x[0]), scale(x[0], 0.5)); }, {leaf({7}, 12)});
}

TEST_CASE("gradcheck: add_bias on 1-D, 2-D and 3-D inputs", "[gradcheck]") {
  for (const Shape& xs : {Shape{5}, Shape{3, 5}, Shape{2, 3, 5}}) {
    INFO("x " << shape_str(xs));
    CHECK_GRADCHECK([](const Inputs& x) { return add_bias(x[0], x[1]); }, {leaf(xs, 15), leaf({5}, 16)});
  }
  // The same as linear's bias: linear(x, w, b) == add_bias(linear(x, w), b).
  const Tensor x = Tensor::randn({4, 3}, 17), w = Tensor::randn({5, 3}, 18), b = Tensor::randn({5}, 19);
  CHECK(add_bias(linear(x, w), b).to_vector() == linear(x, w, b).to_vector());
  CHECK_THROWS_WITH(add_bias(x, b),
                    Catch::Contains("add_bias: bias f32(5,) on cpu does not match the last dim of f32(4, 3)"));
}

TEST_CASE("gradcheck: gelu and relu away from relu's kink", "[gradcheck]") {
  for (const Shape& s : {Shape{1}, Shape{3, 7}, Shape{2, 3, 5}}) {
    INFO("shape " << shape_str(s));
    CHECK_GRADCHECK([](const Inputs& x) { return gelu(x[0]); }, {away_from_zero(leaf(s, 20, 2.f))});
    CHECK_GRADCHECK([](const Inputs& x) { return relu(x[0]); }, {away_from_zero(leaf(s, 21, 2.f))});
  }
}

TEST_CASE("gradcheck: layernorm with respect to x, weight and bias", "[gradcheck]") {
  for (const Shape& s : {Shape{1, 5}, Shape{3, 5}, Shape{2, 2, 7}, Shape{4, 1}}) {
    INFO("x " << shape_str(s));
    const int64_t C = s.back();
    CHECK_GRADCHECK([](const Inputs& x) { return layernorm(x[0], x[1], x[2]); },
                    {leaf(s, 30), leaf({C}, 31), leaf({C}, 32)});
  }
  // A large eps changes rstd noticeably; the backward must use the same eps.
  CHECK_GRADCHECK([](const Inputs& x) { return layernorm(x[0], x[1], x[2], 0.5); },
                  {leaf({3, 5}, 33, 0.5f), leaf({5}, 34), leaf({5}, 35)});
}

TEST_CASE("gradcheck: softmax, plain and causal", "[gradcheck]") {
  for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{2, 3, 5}}) {
    INFO("plain " << shape_str(s));
    CHECK_GRADCHECK([](const Inputs& x) { return softmax(x[0]); }, {leaf(s, 40)});
  }
  for (const Shape& s : {Shape{1, 1}, Shape{5, 5}, Shape{2, 5, 5}, Shape{1, 2, 3, 3}}) {
    INFO("causal " << shape_str(s));
    CHECK_GRADCHECK([](const Inputs& x) { return softmax(x[0], Causal::yes); }, {leaf(s, 41)});
  }
}

TEST_CASE("gradcheck: attention (B=2, T=5, NH=2, HS=3) and a single-token sequence", "[gradcheck]") {
  for (const Shape& s : {Shape{2, 5, 2, 3}, Shape{1, 1, 2, 3}, Shape{2, 1, 1, 3}}) {
    INFO("q/k/v " << shape_str(s));
    CHECK_GRADCHECK([](const Inputs& x) { return attention(x[0], x[1], x[2]); },
                    {leaf(s, 50), leaf(s, 51), leaf(s, 52)});
  }
  // Only v requires grad: q and k get no gradient but v's must still be right.
  const Shape s{2, 4, 2, 3};
  CHECK_GRADCHECK([](const Inputs& x) { return attention(x[0], x[1], x[2]); },
                  {Tensor::randn(s, 53, 1.f, DType::f64), Tensor::randn(s, 54, 1.f, DType::f64), leaf(s, 55)});
}

TEST_CASE("gradcheck: non-causal attention (every query sees every key)", "[gradcheck]") {
  // T = 5 and 7 (odd, several keys per query both sides of the diagonal),
  // a single token, and HS = 1 (one dim per head).
  for (const Shape& s : {Shape{2, 5, 2, 3}, Shape{1, 7, 1, 4}, Shape{1, 1, 2, 3}, Shape{2, 3, 2, 1}}) {
    INFO("q/k/v " << shape_str(s));
    CHECK_GRADCHECK([](const Inputs& x) { return attention(x[0], x[1], x[2], Causal::no); },
                    {leaf(s, 60), leaf(s, 61), leaf(s, 62)});
  }
  // Only q requires grad (a cross-attention-like use: k and v are constants).
  const Shape s{2, 4, 2, 3};
  CHECK_GRADCHECK([](const Inputs& x) { return attention(x[0], x[1], x[2], Causal::no); },
                  {leaf(s, 63), Tensor::randn(s, 64, 1.f, DType::f64), Tensor::randn(s, 65, 1.f, DType::f64)});
}

TEST_CASE("gradcheck: a slice of the queries at an offset against every key (context parallel)", "[gradcheck]") {
  // 3 queries at positions off..off+2 of 7 keys: causal masks keys past each
  // query's position (the diagonal moved by off), none masks nothing.
  const Shape sq{2, 3, 2, 3}, sk{2, 7, 2, 3};
  for (Causal c : {Causal::yes, Causal::no})
    for (int64_t off : {0, 2, 4}) {
      INFO((c == Causal::yes ? "causal" : "not causal") << " offset " << off);
      CHECK_GRADCHECK([c, off](const Inputs& x) { return attention(x[0], x[1], x[2], c, AttentionImpl::ours, off); },
                      {leaf(sq, 70), leaf(sk, 71), leaf(sk, 72)});
    }
}

TEST_CASE("attention: a slice of the queries equals those rows of self-attention, forward and backward",
          "[gradcheck]") {
  // Self-attention over all T positions, with the gradient zero outside the
  // slice, against the slice's Tq queries at offset off: the same rows out,
  // the same dq rows, and the same dk, dv (only the slice's queries reach them).
  const int64_t B = 2, T = 9, NH = 2, HS = 3;
  for (Causal c : {Causal::yes, Causal::no})
    for (int64_t off : {0, 3, 6}) {
      INFO((c == Causal::yes ? "causal" : "not causal") << " offset " << off);
      const int64_t Tq = 3;
      const Tensor q = Tensor::randn({B, T, NH, HS}, 80), k = Tensor::randn({B, T, NH, HS}, 81),
                   v = Tensor::randn({B, T, NH, HS}, 82), g = Tensor::randn({B, Tq, NH, HS}, 83);
      Tensor qf = q.clone().set_requires_grad(true), kf = k.clone().set_requires_grad(true),
             vf = v.clone().set_requires_grad(true);
      std::vector<Tensor> parts;  // the gradient: g at the slice's rows, 0 elsewhere
      if (off > 0) parts.push_back(Tensor::zeros({B, off, NH, HS}));
      parts.push_back(g);
      if (off + Tq < T) parts.push_back(Tensor::zeros({B, T - off - Tq, NH, HS}));
      const Tensor gf = concat(parts, 1);
      attention(qf, kf, vf, c).backward(gf);
      Tensor qs = narrow(q, 1, off, Tq).clone().set_requires_grad(true), ks = k.clone().set_requires_grad(true),
             vs = v.clone().set_requires_grad(true);
      Tensor out = attention(qs, ks, vs, c, AttentionImpl::ours, off);
      out.backward(g);
      NoGradGuard ng;
      CHECK_CLOSE(test::values(out), test::values(narrow(attention(q, k, v, c), 1, off, Tq)), 1e-6, 1e-5);
      CHECK_CLOSE(test::values(qs.grad()), test::values(narrow(qf.grad(), 1, off, Tq)), 1e-6, 1e-5);
      CHECK_CLOSE(test::values(ks.grad()), test::values(kf.grad()), 1e-6, 1e-5);
      CHECK_CLOSE(test::values(vs.grad()), test::values(vf.grad()), 1e-6, 1e-5);
    }
}

TEST_CASE("attention: queries at an offset past the keys are refused", "[gradcheck]") {
  const Tensor q = Tensor::randn({1, 3, 1, 2}, 1), k = Tensor::randn({1, 4, 1, 2}, 2);
  CHECK_THROWS_WITH(attention(q, k, k, Causal::yes, AttentionImpl::ours, 2),
                    Catch::Contains("3 queries at offset 2 do not lie within 4 keys"));
  CHECK_THROWS_WITH(attention(k, q, q), Catch::Contains("do not lie within"));
}

TEST_CASE("gradcheck: cross_entropy with respect to the logits, with ignored targets", "[gradcheck]") {
  const Tensor targets = Tensor::from_ints({3, -100, 0, 6}, {4});
  CHECK_GRADCHECK([&](const Inputs& x) { return cross_entropy(x[0], targets); }, {leaf({4, 7}, 60, 2.f)});
  const Tensor one = Tensor::from_ints({2}, {1});
  CHECK_GRADCHECK([&](const Inputs& x) { return cross_entropy(x[0], one); }, {leaf({1, 5}, 61)});
  // A non-default ignore_index: rows with target 2 are skipped (and -100 would
  // now be out of range, so it is not used).
  const Tensor t2 = Tensor::from_ints({2, 1, 2, 0}, {4});
  CHECK_GRADCHECK([&](const Inputs& x) { return cross_entropy(x[0], t2, 2); }, {leaf({4, 3}, 62)});
  // Every row ignored: the loss is the constant 0, so the gradient must be 0.
  const Tensor none = Tensor::from_ints({-100, -100}, {2});
  CHECK_GRADCHECK([&](const Inputs& x) { return cross_entropy(x[0], none); }, {leaf({2, 3}, 63)});
}

TEST_CASE("gradcheck: mse_loss with respect to both inputs", "[gradcheck]") {
  for (const Shape& s : {Shape{1}, Shape{3, 5}, Shape{2, 1, 3}}) {
    INFO("shape " << shape_str(s));
    CHECK_GRADCHECK([](const Inputs& x) { return mse_loss(x[0], x[1]); }, {leaf(s, 70), leaf(s, 71)});
  }
}

TEST_CASE("gradcheck: sum and mean along each dim, with and without keepdim", "[gradcheck]") {
  for (int d = 0; d < 3; ++d)
    for (bool keep : {false, true}) {
      INFO("dim " << d << (keep ? " keepdim" : ""));
      CHECK_GRADCHECK([=](const Inputs& x) { return sum(x[0], d, keep); }, {leaf({2, 3, 4}, uint64_t(80 + d))});
      CHECK_GRADCHECK([=](const Inputs& x) { return mean(x[0], d, keep); }, {leaf({3, 1, 5}, uint64_t(90 + d))});
    }
}

TEST_CASE("gradcheck: embedding with respect to the weight, with repeated ids", "[gradcheck]") {
  const Tensor ids = Tensor::from_ints({2, 0, 2, 4, 2, 2}, {2, 3});  // id 2 four times; 1 and 3 unused
  CHECK_GRADCHECK([&](const Inputs& x) { return embedding(x[0], ids); }, {leaf({5, 3}, 80)});
  const Tensor one = Tensor::from_ints({1}, {1});
  CHECK_GRADCHECK([&](const Inputs& x) { return embedding(x[0], one); }, {leaf({3, 1}, 81)});
}

TEST_CASE("gradcheck: a small network chaining several ops", "[gradcheck]") {
  // Gradients from the residual branch and the main path meet in x and in w1.
  const Tensor targets = Tensor::from_ints({1, 4, 0}, {3});
  auto net = [&](const Inputs& p) {
    Tensor h = layernorm(p[0], p[3], p[4]);
    Tensor a = gelu(linear(h, p[1], p[2]));
    Tensor r = add(linear(a, p[1]), p[0]);  // w1 used twice (square 5x5)
    return cross_entropy(r, targets);
  };
  CHECK_GRADCHECK(net, {leaf({3, 5}, 90), leaf({5, 5}, 91, 0.5f), leaf({5}, 92), leaf({5}, 93), leaf({5}, 94)});
}

TEST_CASE("gradcheck: f64 backward of scalar-output ops keeps full precision", "[gradcheck]") {
  // The incoming gradient 0.1 is not representable in f32; a backward that
  // routes it through float would be off by ~1.5e-9, which the finite
  // differences above cannot resolve but training in f64 would inherit.
  const double g0 = 0.1;
  const Tensor seed = Tensor::full({}, g0, DType::f64);
  auto check = [&](const char* name, const std::function<Tensor(const Tensor&)>& f, const Shape& s,
                   const std::function<double(double, int64_t)>& expect) {
    INFO(name);
    Tensor x = leaf(s, 100);
    f(x).backward(seed);
    const std::vector<double> xv = test::values(x), gv = test::values(x.grad());
    std::vector<double> ref(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) ref[i] = expect(xv[i], int64_t(i));
    CHECK_CLOSE(gv, ref, 0.0, 1e-14);
  };
  check(
      "sum", [](const Tensor& x) { return sum(x); }, {3}, [&](double, int64_t) { return g0; });
  check(
      "mean", [](const Tensor& x) { return mean(x); }, {4}, [&](double, int64_t) { return g0 / 4; });
  check(
      "mse_loss", [](const Tensor& x) { return mse_loss(x, Tensor::zeros({4}, DType::f64)); }, {4},
      [&](double v, int64_t) { return g0 * 2 * v / 4; });
  // cross_entropy of a single row with all-equal logits: softmax is exactly 1/V.
  Tensor logits = Tensor::zeros({1, 4}, DType::f64).set_requires_grad(true);
  cross_entropy(logits, Tensor::from_ints({1}, {1})).backward(seed);
  CHECK_CLOSE(test::values(logits.grad()), (std::vector<double>{g0 / 4, g0 / 4 - g0, g0 / 4, g0 / 4}), 0.0, 1e-14);
}

TEST_CASE("gradcheck: the checker itself rejects a wrong backward", "[gradcheck]") {
  // A hand-recorded y = 3x whose backward is slightly or grossly wrong: the
  // passes above only mean something if these are caught.
  auto op_with_backward_factor = [](double factor) {
    return [factor](const Inputs& x) {
      Tensor y = scale(x[0].detach(), 3.0);  // detached: the forward records nothing itself
      record("scale3", y, {x[0]},
             [factor](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{scale(g, factor)}; });
      return y;
    };
  };
  CHECK(test::gradcheck(op_with_backward_factor(3.0), {leaf({3, 2}, 110)}).empty());
  CHECK_FALSE(test::gradcheck(op_with_backward_factor(1.0), {leaf({3, 2}, 111)}).empty());
  CHECK_FALSE(test::gradcheck(op_with_backward_factor(3.0 * (1 + 1e-4)), {leaf({3, 2}, 112)}).empty());
}
