// The GEMM epilogues of a training step's fusions (kernels/cuda/gemm.cu)
// under the emulator, each against the unfused ops it replaces:
//  - out_f32: a weight gradient G^T X of 16-bit operands written in fp32,
//    with its bias gradient: equal to the fp32 product of the rounded
//    operands to fp32's tolerance (no 16-bit rounding on the way);
//  - bias_residual: R + A W^T + b, against the cpu's product plus bias and
//    R, rounded once; residual, the same without b (a Llama block's);
//  - dgelu: the product times gelu'(pre), bit for bit the GEMM then
//    activation.cu's gelu_backward (both start from the rounded product;
//    where kernels contract FMAs, a GPU's or an ENGINE_EMU_FMA build's, to
//    the GEMM's tolerance);
//  - the arguments each epilogue refuses.
// Tolerances as test_gemm_emu.cpp's (gemm_tol).
#include <cmath>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/gemm.h"
#include "tests/kernels/gemm_check.h"

using namespace eng;
using namespace eng::test;

TEST_CASE("emu tiled_gemm: an fp32 weight gradient of 16-bit operands, with its bias gradient", "[emu][kernels]") {
  // dW (M, N) = G^T X, G stored (K, M): M 70 (ragged row tiles), N 5 and 130
  // (one and three column tiles), K 37 (a ragged last k tile).
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t N : {5, 130}) {
      INFO(dtype_name(t) << " N " << N);
      const int64_t M = 70, K = 37;
      GemmCall c = plain_call(Trans::T, Trans::N, M, N, K);
      c.out_f32 = true;
      const Tensor G = Tensor::randn({K, M}, uint64_t(N)), X = Tensor::randn({K, N}, uint64_t(N + 1));
      Tensor ref = Tensor::zeros({M * N}), ref_db = Tensor::empty({M});
      reference_gemm(c, rounded(G, t), rounded(X, t), Tensor(), ref);
      cpu::bias_backward<float>(rounded(G, t).data<float>(), ref_db.data<float>(), K, M);
      Tensor out = Tensor::full({M * N}, NAN, DType::f32, kEmu), db = Tensor::full({M}, NAN, DType::f32, kEmu);
      const Tensor eg = on_emu(G, t), ex = on_emu(X, t);
      ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, eg.data_ptr(), ex.data_ptr(), out.data_ptr(),
                      db.data_ptr(), Epilogue::bgrad, nullptr, nullptr);
      // fp32's tolerance: a 16-bit C would be off by half an ulp of bf16/f16.
      CHECK_TOL(out, ref, gemm_tol(DType::f32, K));
      CHECK_TOL(db, ref_db, gemm_tol(DType::f32, K));
      // beta = 1 accumulates into the fp32 C (micro-batches' weight gradients).
      c.beta = 1.f;
      ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, eg.data_ptr(), ex.data_ptr(), out.data_ptr(), nullptr,
                      Epilogue::none, nullptr, nullptr);
      Tensor twice = ref.clone();
      for (int64_t i = 0; i < M * N; ++i) twice.data<float>()[i] *= 2.f;
      CHECK_TOL(out, twice, gemm_tol(DType::f32, K, 2.0));
    }
}

TEST_CASE("emu tiled_gemm: the residual epilogues add R (and the bias) in one rounding", "[emu][kernels]") {
  // A linear layer's forward: (M, K) @ (N, K)^T, ragged against the tiles;
  // bias_residual, and residual without the bias.
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (bool with_bias : {true, false}) {
      INFO(dtype_name(t) << (with_bias ? " bias_residual" : " residual"));
      const int64_t M = 67, N = 33, K = 40;
      const GemmCall c = plain_call(Trans::N, Trans::T, M, N, K);
      const Tensor A = Tensor::randn({M * K}, 31), W = Tensor::randn({N * K}, 32), b = Tensor::randn({N}, 33);
      const Tensor R = Tensor::randn({M * N}, 34, 4.f);  // a residual stream larger than the product's terms
      Tensor ref = Tensor::zeros({M * N});
      reference_gemm(c, rounded(A, t), rounded(W, t), with_bias ? rounded(b, t) : Tensor(), ref);
      const Tensor rr = rounded(R, t);
      for (int64_t i = 0; i < M * N; ++i) ref.data<float>()[i] += rr.data<float>()[i];
      const Tensor ea = on_emu(A, t), ew = on_emu(W, t), eb = on_emu(b, t), er = on_emu(R, t);
      Tensor out = Tensor::full({M * N}, NAN, t, kEmu);
      ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, ea.data_ptr(), ew.data_ptr(), out.data_ptr(),
                      with_bias ? eb.data_ptr() : nullptr, with_bias ? Epilogue::bias_residual : Epilogue::residual,
                      er.data_ptr(), nullptr);
      // One rounding of a value up to ~4 sqrt(K): the tolerance at 4x scale.
      CHECK_TOL(out, ref, gemm_tol(t, K, 4.0));
      CHECK(values(er.to(kCPU)) == values(rr));  // R is only read
    }
}

TEST_CASE("emu tiled_gemm: the GELU-gradient epilogue equals the GEMM then gelu_backward, bit for bit",
          "[emu][kernels]") {
  // The input gradient of the layer after a GELU: dH (M, N) = G (M, K) @ W (K, N), then * gelu'(pre).
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const int64_t M = 66, N = 72, K = 35;
    const GemmCall c = plain_call(Trans::N, Trans::N, M, N, K);
    const Tensor G = on_emu(Tensor::randn({M * K}, 41), t), W = on_emu(Tensor::randn({K * N}, 42), t);
    const Tensor pre = on_emu(Tensor::randn({M * N}, 43, 2.f), t);
    Tensor fused = Tensor::full({M * N}, NAN, t, kEmu), plain = Tensor::full({M * N}, NAN, t, kEmu);
    ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, G.data_ptr(), W.data_ptr(), fused.data_ptr(), nullptr,
                    Epilogue::dgelu, pre.data_ptr(), nullptr);
    ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, G.data_ptr(), W.data_ptr(), plain.data_ptr(), nullptr,
                    Epilogue::none, nullptr, nullptr);
    Tensor dx = Tensor::full({M * N}, NAN, t, kEmu);
    ENGINE_GPU_CALL(kEmu, gelu_backward, gpu::storage_of(t), pre.data_ptr(), plain.data_ptr(), dx.data_ptr(), M * N,
                    nullptr);
    // A GPU (or an FMA-contracting emulator build) may contract the two
    // kernels' expressions differently: there, to the GEMM's tolerance.
    if (kKernelsRoundLikeCpu)
      CHECK(values(fused.to(kCPU)) == values(dx.to(kCPU)));
    else
      CHECK_TOL(fused, dx.to(kCPU).to(DType::f32), gemm_tol(t, K));
  }
}

TEST_CASE("emu tiled_gemm: the new epilogues' arguments are checked", "[emu][kernels]") {
  const Tensor z = Tensor::zeros({64}, DType::bf16, kEmu), zf = Tensor::zeros({64}, DType::f32, kEmu);
  auto run = [&](GemmCall c, gpu::Storage st, const void* bias, Epilogue epi, const void* aux) {
    const void* buf = st == gpu::Storage::f32 ? zf.data_ptr() : z.data_ptr();
    ENGINE_GPU_CALL(kEmu, tiled_gemm, st, c, buf, buf, zf.data_ptr(), bias, epi, const_cast<void*>(aux), nullptr);
  };
  const GemmCall nt = plain_call(Trans::N, Trans::T, 4, 4, 4);
  GemmCall beta1 = nt;
  beta1.beta = 1.f;
  CHECK_THROWS_WITH(run(beta1, gpu::Storage::bf16, z.data_ptr(), Epilogue::bias_residual, z.data_ptr()),
                    Catch::Contains("beta must be 0"));
  CHECK_THROWS_WITH(run(nt, gpu::Storage::bf16, z.data_ptr(), Epilogue::bias_residual, nullptr),
                    Catch::Contains("an aux matrix goes with"));
  CHECK_THROWS_WITH(run(nt, gpu::Storage::bf16, z.data_ptr(), Epilogue::dgelu, z.data_ptr()),
                    Catch::Contains("take no bias"));
  CHECK_THROWS_WITH(run(nt, gpu::Storage::bf16, z.data_ptr(), Epilogue::residual, z.data_ptr()),
                    Catch::Contains("take no bias"));
  CHECK_THROWS_WITH(run(beta1, gpu::Storage::bf16, nullptr, Epilogue::residual, z.data_ptr()),
                    Catch::Contains("beta must be 0"));
  GemmCall wide = plain_call(Trans::T, Trans::N, 4, 4, 4);
  wide.out_f32 = true;
  CHECK_THROWS_WITH(run(wide, gpu::Storage::f32, nullptr, Epilogue::none, nullptr), Catch::Contains("G^T X"));
  GemmCall wide_nt = nt;
  wide_nt.out_f32 = true;
  CHECK_THROWS_WITH(run(wide_nt, gpu::Storage::bf16, nullptr, Epilogue::none, nullptr), Catch::Contains("G^T X"));
  CHECK_THROWS_WITH(run(wide, gpu::Storage::bf16, z.data_ptr(), Epilogue::bias, nullptr),
                    Catch::Contains("no epilogue but the bias gradient"));
}
