// The tensor-core GEMM rung (kernels/cuda/gemm_mma.cu) against the cpu
// reference (OpenBLAS in f32 on inputs rounded to the storage type), every
// transpose, bf16 and f16, at shapes whose M, N and K are not multiples of
// the 64 x 64 x 32 tile nor of a 16 x 8 x 16 mma (ragged edges come in
// through cp.async's zero fill), with leading dimensions wider than the rows.
// Tolerance: gemm_check.h's (fp32 sums in another order, one rounding).
// Then the rest of tiled_gemm's contract: alpha, beta, the bias and a
// strided batch (shared B and not) against the cpu; every epilogue against
// tiled_gemm's on the same inputs (tested against the unfused ops in
// test_gemm_epilogue_emu.cpp), the bias gradient bit for bit (both sum
// op(A)'s rows in k order); and matmul's executor switch (set_gemm_impl).
#include <cmath>
#include <set>
#include <string>

#include "engine/kernel_profile.h"
#include "engine/ops.h"
#include "kernels/cuda/gemm_mma.h"
#include "tests/kernels/gemm_check.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("emu gemm_mma: every transpose, ragged shapes, bf16 and f16 against the cpu", "[emu][kernels]") {
  struct Shape3 {
    int64_t M, N, K;
  };
  for (DType t : {DType::bf16, DType::f16})
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (const Shape3 s : {Shape3{16, 8, 16}, Shape3{67, 96, 80}, Shape3{130, 72, 41}, Shape3{5, 3, 8}}) {
          INFO(dtype_name(t) << (ta == Trans::T ? " T" : " N") << (tb == Trans::T ? "T " : "N ") << s.M << "x" << s.N
                             << "x" << s.K);
          GemmCall g = plain_call(ta, tb, s.M, s.N, s.K);
          // Leading dimensions rounded up to 8 elements (cp.async's 16 bytes), plus 8 spare.
          g.lda = (g.lda + 7) / 8 * 8 + 8, g.ldb = (g.ldb + 7) / 8 * 8 + 8, g.ldc = s.N + 3;
          const GemmSizes sz = gemm_sizes(g);
          const Tensor a = Tensor::randn({sz.a}, uint64_t(s.M * 7 + s.K)),
                       b = Tensor::randn({sz.b}, uint64_t(s.N * 5 + s.K));
          Tensor ref = Tensor::zeros({sz.c});
          reference_gemm(g, rounded(a, t), rounded(b, t), Tensor(), ref);
          const Tensor da = on_emu(a, t), db = on_emu(b, t);
          Tensor dc = Tensor::zeros({sz.c}, t, kEmu);
          ENGINE_GPU_CALL(kEmu, gemm_mma, gpu::storage_of(t), g, da.data_ptr(), db.data_ptr(), dc.data_ptr(), nullptr,
                          Epilogue::none, nullptr, nullptr);
          CHECK_TOL(dc, ref, gemm_tol(t, s.K));
        }
}

TEST_CASE("emu gemm_mma: refuses what cp.async cannot copy", "[emu][kernels]") {
  GemmCall g = plain_call(Trans::N, Trans::T, 8, 8, 12);  // lda = ldb = 12: rows not on 16 bytes
  const Tensor a = on_emu(Tensor::randn({96}, 1), DType::bf16), b = on_emu(Tensor::randn({96}, 2), DType::bf16);
  Tensor c = Tensor::zeros({64}, DType::bf16, kEmu);
  const auto call = [&] {
    ENGINE_GPU_CALL(kEmu, gemm_mma, gpu::Storage::bf16, g, a.data_ptr(), b.data_ptr(), c.data_ptr(), nullptr,
                    Epilogue::none, nullptr, nullptr);
  };
  CHECK_THROWS_WITH(call(), Catch::Matchers::Contains("lda 12, ldb 12 (and batch strides) must be multiples of 8"));
  CHECK_FALSE(gemm_mma_takes(gpu::Storage::bf16, g, a.data_ptr(), b.data_ptr()));
  g.lda = g.ldb = 16;
  CHECK(gemm_mma_takes(gpu::Storage::bf16, g, a.data_ptr(), b.data_ptr()));
  CHECK_FALSE(gemm_mma_takes(gpu::Storage::f32, g, a.data_ptr(), b.data_ptr()));
  CHECK_FALSE(gemm_mma_takes(gpu::Storage::bf16, g, static_cast<const char*>(a.data_ptr()) + 2, b.data_ptr()));
}

TEST_CASE("emu gemm_mma: an fp32 weight gradient accumulated (beta 1), and what it does not take", "[emu][kernels]") {
  // dW (M, N) += G^T X into fp32, as micro-batches' weight gradients accumulate.
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const int64_t M = 70, N = 40, K = 37;
    GemmCall c = plain_call(Trans::T, Trans::N, M, N, K);
    c.lda = 72, c.out_f32 = true, c.beta = 1.f;
    const GemmSizes sz = gemm_sizes(c);
    const Tensor G = Tensor::randn({sz.a}, 91), X = Tensor::randn({sz.b}, 92), C0 = Tensor::randn({sz.c}, 93);
    Tensor ref = C0.clone();
    reference_gemm(c, rounded(G, t), rounded(X, t), Tensor(), ref);
    Tensor out = C0.to(kEmu);
    const Tensor eg = on_emu(G, t), ex = on_emu(X, t);
    ENGINE_GPU_CALL(kEmu, gemm_mma, gpu::storage_of(t), c, eg.data_ptr(), ex.data_ptr(), out.data_ptr(), nullptr,
                    Epilogue::none, nullptr, nullptr);
    CHECK_TOL(out, ref, gemm_tol(DType::f32, K, 2.0));
  }
  // A batch stride that moves A off 16 bytes, and more than 65535 row tiles: not taken.
  GemmCall b = plain_call(Trans::N, Trans::T, 8, 8, 16);
  const Tensor a = on_emu(Tensor::randn({512}, 1), DType::bf16);
  b.batch = 2, b.stride_a = 132, b.stride_b = 128;
  CHECK_FALSE(gemm_mma_takes(gpu::Storage::bf16, b, a.data_ptr(), a.data_ptr()));
  b.stride_a = 128;
  CHECK(gemm_mma_takes(gpu::Storage::bf16, b, a.data_ptr(), a.data_ptr()));
  b.M = 64 * 65535 + 1;
  CHECK_FALSE(gemm_mma_takes(gpu::Storage::bf16, b, a.data_ptr(), a.data_ptr()));
}

TEST_CASE("emu gemm_mma: alpha, beta, bias and a strided batch (shared B and not) against the cpu", "[emu][kernels]") {
  for (DType t : {DType::bf16, DType::f16})
    for (bool shared_b : {true, false}) {
      INFO(dtype_name(t) << (shared_b ? " shared B" : " batched B"));
      const int64_t M = 67, N = 72, K = 40, batch = 3;
      GemmCall g = plain_call(Trans::N, Trans::T, M, N, K);
      g.batch = batch, g.alpha = 0.5f, g.beta = 1.f;
      g.stride_a = M * g.lda, g.stride_b = shared_b ? 0 : N * g.ldb, g.stride_c = M * g.ldc + 8;
      const GemmSizes sz = gemm_sizes(g);
      const Tensor a = Tensor::randn({sz.a}, 61), b = Tensor::randn({sz.b}, 62), c0 = Tensor::randn({sz.c}, 63);
      const Tensor bias = Tensor::randn({N}, 64);
      Tensor ref = rounded(c0, t);
      reference_gemm(g, rounded(a, t), rounded(b, t), rounded(bias, t), ref);
      Tensor dc = on_emu(c0, t);
      const Tensor da = on_emu(a, t), db = on_emu(b, t), dbias = on_emu(bias, t);
      ENGINE_GPU_CALL(kEmu, gemm_mma, gpu::storage_of(t), g, da.data_ptr(), db.data_ptr(), dc.data_ptr(),
                      dbias.data_ptr(), Epilogue::bias, nullptr, nullptr);
      CHECK_TOL(dc, ref, gemm_tol(t, K, 2.0));
    }
}

namespace {
// One call of `fn` (tiled_gemm or gemm_mma) with epilogue `epi` on fresh
// copies of the same inputs: C (fp32 when c.out_f32), aux and the bias
// gradient afterwards, on the host.
struct EpiOut {
  std::vector<double> c, aux, dbias;
};
template <typename F>
EpiOut run_epilogue(F fn, DType t, const GemmCall& c, Epilogue epi, const Tensor& a, const Tensor& b,
                    const Tensor& bias, const Tensor& aux0) {
  const DType ct = c.out_f32 ? DType::f32 : t;
  Tensor out = Tensor::full({c.M * c.ldc}, NAN, ct, kEmu);
  Tensor aux = on_emu(aux0, t), dbias = Tensor::full({c.M}, NAN, ct, kEmu);
  const Tensor ea = on_emu(a, t), eb = on_emu(b, t), ebias = on_emu(bias, t);
  const void* bias_p = epi == Epilogue::bgrad ? dbias.data_ptr() : epilogue_adds_bias(epi) ? ebias.data_ptr() : nullptr;
  fn(gpu::storage_of(t), c, ea.data_ptr(), eb.data_ptr(), out.data_ptr(), bias_p, epi,
     epilogue_takes_aux(epi) ? aux.data_ptr() : nullptr);
  return {values(out.to(kCPU)), values(aux.to(kCPU)),
          epi == Epilogue::bgrad ? values(dbias.to(kCPU)) : std::vector<double>{}};
}
}  // namespace

TEST_CASE("emu gemm_mma: every epilogue as tiled_gemm gives it", "[emu][kernels]") {
  const auto tiled = [](gpu::Storage st, const GemmCall& c, const void* A, const void* B, void* C, const void* bias,
                        Epilogue epi,
                        void* aux) { ENGINE_GPU_CALL(kEmu, tiled_gemm, st, c, A, B, C, bias, epi, aux, nullptr); };
  const auto mma = [](gpu::Storage st, const GemmCall& c, const void* A, const void* B, void* C, const void* bias,
                      Epilogue epi,
                      void* aux) { ENGINE_GPU_CALL(kEmu, gemm_mma, st, c, A, B, C, bias, epi, aux, nullptr); };
  const int64_t M = 70, N = 72, K = 37;
  for (DType t : {DType::bf16, DType::f16})
    for (Epilogue epi : {Epilogue::bias, Epilogue::gelu_bias, Epilogue::gelu_aux_bias, Epilogue::bias_residual,
                         Epilogue::residual, Epilogue::dgelu, Epilogue::bgrad}) {
      INFO(dtype_name(t) << " epilogue " << int(epi));
      // The forward's x W^T; the weight gradient's G^T X (A transposed), written in fp32 with its bias gradient.
      const bool wgrad = epi == Epilogue::bgrad;
      GemmCall c = wgrad ? plain_call(Trans::T, Trans::N, M, N, K) : plain_call(Trans::N, Trans::T, M, N, K);
      c.lda = (c.lda + 7) / 8 * 8, c.ldb = (c.ldb + 7) / 8 * 8;
      c.out_f32 = wgrad;
      const GemmSizes sz = gemm_sizes(c);
      const Tensor a = Tensor::randn({sz.a}, 71), b = Tensor::randn({sz.b}, 72), bias = Tensor::randn({N}, 73);
      const Tensor aux0 = Tensor::randn({sz.c}, 74, 2.f);
      const EpiOut want = run_epilogue(tiled, t, c, epi, a, b, bias, aux0);
      const EpiOut got = run_epilogue(mma, t, c, epi, a, b, bias, aux0);
      // Two roundings of two fp32 sums: the product's own tolerance, twice (GELU's slope is at most ~1.13).
      const Tol tol = gemm_tol(wgrad ? DType::f32 : t, K, 2.0);
      CHECK_CLOSE(got.c, want.c, tol.atol, tol.rtol);
      CHECK_CLOSE(got.aux, want.aux, tol.atol, tol.rtol);
      CHECK(got.dbias == want.dbias);  // the same row sums in the same order
    }
}

TEST_CASE("emu matmul: set_gemm_impl(mma) runs the 16-bit products on gemm_mma, as the default does them",
          "[emu][kernels]") {
  const int64_t B = 2, T = 19, C = 64, H = 4 * C;
  struct Restore {  // the process-wide default back, whatever happens
    ~Restore() { set_gemm_impl(GemmImpl::cublaslt); }
  };
  const auto run = [&](DType t, GemmImpl impl) {
    const Restore restore;
    set_gemm_impl(impl);
    KernelProfile prof(kEmu);
    prof.start();
    const Tensor x = on_emu(Tensor::randn({B, T, C}, 81), t).set_requires_grad(true);
    const Tensor w1 = on_emu(Tensor::randn({H, C}, 82, 0.1f), t).set_requires_grad(true);
    const Tensor b1 = on_emu(Tensor::randn({H}, 83), t).set_requires_grad(true);
    const Tensor w2 = on_emu(Tensor::randn({C, H}, 84, 0.1f), t).set_requires_grad(true);
    const Tensor b2 = on_emu(Tensor::randn({C}, 85), t).set_requires_grad(true);
    // An MLP with its residual: linear + GELU, then the projection onto x.
    const Tensor y = linear_residual(linear_gelu(x, w1, b1), w2, b2, x);
    y.backward(on_emu(Tensor::randn({B, T, C}, 86), t));
    prof.stop();
    std::set<std::string> names;
    for (const KernelCall& k : prof.calls()) names.insert(k.name);
    std::vector<std::vector<double>> v{values(y.to(kCPU))};
    for (const Tensor* p : {&x, &w1, &b1, &w2, &b2}) v.push_back(values(p->grad().to(kCPU)));
    return std::pair{names, v};
  };
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const auto [mma_names, mma] = run(t, GemmImpl::mma);
    const auto [def_names, def] = run(t, GemmImpl::cublaslt);
    int mma_gemms = 0;
    for (const std::string& n : mma_names) mma_gemms += n.starts_with("gemm ") && n.ends_with(" mma");
    CHECK(mma_gemms >= 4);  // fc +bias+gelu, proj +bias+residual, their input and weight gradients
    for (const std::string& n : def_names) CHECK_FALSE(n.ends_with(" mma"));
    const Tol tol = gemm_tol(t, H, 4.0);
    for (size_t i = 0; i < mma.size(); ++i) CHECK_CLOSE(mma[i], def[i], tol.atol, tol.rtol);
  }
  // f32 products stay on the default executor.
  const auto [f32_names, f32v] = run(DType::f32, GemmImpl::mma);
  for (const std::string& n : f32_names) CHECK_FALSE(n.ends_with(" mma"));
  CHECK(parse_gemm_impl(gemm_impl_name(GemmImpl::mma)) == GemmImpl::mma);
  CHECK_THROWS_WITH(parse_gemm_impl("cutlass"), Catch::Matchers::Contains("cublaslt or mma"));
}
