// Context parallelism against serial references, with the whole world as
// the cp group (np 1..4; T = 12 positions divide by 1..4):
//  - gather_seq_from_cp on small integers (exact): every rank's slice in
//    place, and the backward's sum over ranks of my slice;
//  - all_reduce_cp: the sum forward and backward;
//  - cp_attention, causal and not, forward and backward: each rank's output
//    rows and its q, k, v gradient rows against serial attention over the
//    whole sequence (the same rows, fp32 within 1e-5: the reduce-scatter of
//    dK, dV sums per-rank partials in another order), cpu/mpi, emu/mpi,
//    emu/nccl (the fused kernels' offset diagonal).
#include <catch2/catch.hpp>

#include "comm/cp_mappings.h"
#include "dist_util.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::comm;
using dist_test::setups;
using dist_test::values;

namespace {
Tensor leaf(const Tensor& t) { return t.detach().clone().set_requires_grad(true); }
std::vector<float> host(const Tensor& t) { return t.to(kCPU).to_vector(); }
}  // namespace

TEST_CASE("cp mappings: gather_seq_from_cp and all_reduce_cp against their serial definitions", "[dist][cp]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  const int64_t B = 2, T = 12, C = 3, Tl = T / P;
  for (const auto& s : setups()) {
    INFO(s.name());
    auto cp = make_communicator(world, s.dev, s.backend);
    // Everyone knows the whole (B, T, C) tensor; each rank holds its slice.
    const Tensor whole = Tensor::from_vector(values(0, B * T * C), {B, T, C}, DType::f32, kCPU);
    Tensor x = leaf(narrow(whole, 1, me * Tl, Tl).to(s.dev));
    Tensor y = gather_seq_from_cp(x, *cp);
    CHECK(y.shape() == whole.shape());
    CHECK(host(y) == whole.to_vector());
    // Rank r seeds the gradient r's values: my slice gets the sum over ranks of those rows.
    y.backward(Tensor::from_vector(values(me, B * T * C, 5), {B, T, C}, DType::f32, s.dev));
    std::vector<float> want(size_t(B * Tl * C), 0.f);
    for (int r = 0; r < P; ++r) {
      const Tensor g = Tensor::from_vector(values(r, B * T * C, 5), {B, T, C}, DType::f32, kCPU);
      const std::vector<float> mine = narrow(g, 1, me * Tl, Tl).to_vector();
      for (size_t i = 0; i < want.size(); ++i) want[i] += mine[i];
    }
    CHECK(host(x.grad()) == want);

    x = leaf(Tensor::from_vector(values(me, 6), {2, 3}, DType::f32, s.dev));
    y = all_reduce_cp(x, *cp);
    std::vector<float> sum(6, 0.f), gsum(6, 0.f);
    for (int r = 0; r < P; ++r)
      for (size_t i = 0; i < 6; ++i) sum[i] += values(r, 6)[i], gsum[i] += values(r, 6, 9)[i];
    CHECK(host(y) == sum);
    y.backward(Tensor::from_vector(values(me, 6, 9), {2, 3}, DType::f32, s.dev));
    CHECK(host(x.grad()) == gsum);
    if (P > 1)
      CHECK_THROWS_WITH(cp_slice(Tensor::zeros({2, P * 3 + 1}), 1, *cp), Catch::Contains("does not divide by cp"));
  }
}

TEST_CASE("cp attention: each rank's rows and gradients equal serial attention's", "[dist][cp]") {
  const Group world = Group::world_group();
  const int64_t B = 2, T = 12, NH = 2, HS = 4;
  for (const auto& s : setups())
    for (Causal causal : {Causal::yes, Causal::no}) {
      INFO(s.name() << (causal == Causal::yes ? " causal" : " not causal"));
      auto cp = make_communicator(world, s.dev, s.backend);
      const Shape sh{B, T, NH, HS};
      const Tensor q = Tensor::randn(sh, 1, 1.5f), k = Tensor::randn(sh, 2, 1.5f), v = Tensor::randn(sh, 3),
                   g = Tensor::randn(sh, 4);
      // Serial: the whole sequence on the host.
      Tensor qs = leaf(q), ks = leaf(k), vs = leaf(v);
      attention(qs, ks, vs, causal).backward(g);
      const Tensor ref = attention(q, k, v, causal);
      // This rank's slice, on the device.
      Tensor ql = leaf(cp_slice(q, 1, *cp).to(s.dev)), kl = leaf(cp_slice(k, 1, *cp).to(s.dev)),
             vl = leaf(cp_slice(v, 1, *cp).to(s.dev));
      Tensor out = cp_attention(ql, kl, vl, causal, *cp);
      out.backward(cp_slice(g, 1, *cp).to(s.dev));
      CHECK_CLOSE(test::values(out.to(kCPU)), test::values(cp_slice(ref, 1, *cp)), 1e-5, 1e-5);
      CHECK_CLOSE(test::values(ql.grad().to(kCPU)), test::values(cp_slice(qs.grad(), 1, *cp)), 1e-5, 1e-5);
      CHECK_CLOSE(test::values(kl.grad().to(kCPU)), test::values(cp_slice(ks.grad(), 1, *cp)), 1e-5, 1e-5);
      CHECK_CLOSE(test::values(vl.grad().to(kCPU)), test::values(cp_slice(vs.grad(), 1, *cp)), 1e-5, 1e-5);
    }
}
