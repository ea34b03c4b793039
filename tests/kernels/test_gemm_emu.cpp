// kernels/cuda/gemm.cu under the emulator against the cpu reference
// (OpenBLAS on inputs rounded to the storage dtype): the tiled_gemm launcher
// directly (every transpose, ragged M/N/K against the 64x64x16 tile, alpha,
// beta = 1 accumulation, the bias epilogue, the bias-gradient epilogue),
// bias_backward, and matmul/linear
// forward and backward on emu (batched, shared B, bias) in f32, bf16, f16.
// Tolerances, |x - ref| <= atol + rtol |ref|:
//   GEMM outputs: atol = tol_for(t).atol * sqrt(K), rtol = tol_for(t).rtol.
//     A K-term dot product of unit-variance inputs has magnitude ~ sqrt(K),
//     and reordering its fp32 sum (our FMAs vs OpenBLAS's blocking) moves it
//     by ~ eps sqrt(K) |terms|; near-zero outputs (cancellation) need the
//     absolute part to scale the same way. f32: 1e-5 (eps = 6e-8, so a
//     hundredfold margin). bf16/f16: the output is rounded once to the
//     storage type (half an ulp: 2^-9 / 2^-12 relative), tol_for's 8e-3 / 1e-3.
//   Gradients in bf16/f16: 4x looser. A shared B with a transposed A sums
//   its weight gradient over the batch with beta = 1, re-rounding the
//   partial sum to the storage type after every batch (one half-ulp each).
// Shapes stay small: the emulator costs ~0.5 us per thread per barrier.
#include <cmath>

#include "kernels/cuda/gemm.h"
#include "tests/kernels/gemm_check.h"

using namespace eng;
using namespace eng::test;

namespace {
// Runs one GemmCall on emu (storage t) and on the cpu (f32, rounded inputs)
// and compares. A, B, C are drawn large enough for the call's strides.
void check_call(const GemmCall& c, DType t, bool with_bias, uint64_t seed) {
  const GemmSizes n = gemm_sizes(c);
  const int64_t nc = n.c;
  const Tensor A = Tensor::randn({n.a}, seed), B = Tensor::randn({n.b}, seed + 1);
  const Tensor C0 = Tensor::randn({nc}, seed + 2), bias = Tensor::randn({c.N}, seed + 3);
  Tensor ref = rounded(C0, t).clone();  // rounded() may share C0's storage
  const Tensor ra = rounded(A, t), rb = rounded(B, t), rbias = rounded(bias, t);
  reference_gemm(c, ra, rb, with_bias ? rbias : Tensor(), ref);
  // With beta = 0 the kernel must not read C: hand it NaNs.
  Tensor out = c.beta == 0.f ? Tensor::full({nc}, NAN, t, kEmu) : on_emu(C0, t);
  const Tensor ea = on_emu(A, t), eb = on_emu(B, t), ebias = on_emu(bias, t);
  ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, ea.data_ptr(), eb.data_ptr(), out.data_ptr(),
                  with_bias ? ebias.data_ptr() : nullptr, with_bias ? Epilogue::bias : Epilogue::none, nullptr,
                  nullptr);
  CHECK_TOL(out, ref, gemm_tol(t, c.K));
}

}  // namespace

TEST_CASE("emu tiled_gemm: every transpose, ragged M/N/K, f32/bf16/f16", "[emu][kernels]") {
  // Each of 1, 3, 17, 33, 65 appears as M, N and K (ragged against 64/16).
  const int64_t shapes[][3] = {{1, 1, 1}, {1, 3, 17}, {3, 17, 33}, {17, 33, 65}, {33, 65, 1}, {65, 1, 3}, {65, 65, 65}};
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (const auto& s : shapes) {
          INFO(dtype_name(t) << " ta " << int(ta) << " tb " << int(tb) << " M " << s[0] << " N " << s[1] << " K "
                             << s[2]);
          check_call(plain_call(ta, tb, s[0], s[1], s[2]), t, false, uint64_t(s[0] * 7 + s[1] * 3 + s[2]));
        }
}

TEST_CASE("emu tiled_gemm: alpha, beta = 1 accumulation, bias epilogue, K = 0", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    GemmCall c = plain_call(Trans::T, Trans::N, 33, 17, 65);
    c.alpha = 0.5f, c.beta = 1.f;
    check_call(c, t, false, 11);  // weight-gradient style: C += 0.5 A^T B
    check_call(plain_call(Trans::N, Trans::T, 65, 33, 17), t, true, 12);
    c.beta = 1.f, c.alpha = 1.f;
    check_call(c, t, true, 13);  // beta and bias together
    GemmCall k0 = plain_call(Trans::N, Trans::N, 3, 17, 0);
    k0.beta = 1.f;
    check_call(k0, t, true, 14);  // C = C + bias
  }
}

TEST_CASE("emu tiled_gemm: strided batch, shared B, padded leading dimensions", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(dtype_name(t));
    GemmCall c = plain_call(Trans::N, Trans::T, 17, 33, 65);
    c.batch = 3, c.stride_a = c.M * c.K, c.stride_b = c.N * c.K, c.stride_c = c.M * c.N;
    check_call(c, t, true, 21);
    c.stride_b = 0;  // one B for the whole batch
    check_call(c, t, false, 22);
    GemmCall p = plain_call(Trans::T, Trans::N, 3, 17, 33);
    p.lda += 5, p.ldb += 2, p.ldc += 7, p.beta = 1.f;  // rows wider than the matrix
    p.batch = 2, p.stride_a = p.K * p.lda + 1, p.stride_b = p.K * p.ldb, p.stride_c = p.M * p.ldc + 3;
    check_call(p, t, false, 23);
  }
}

TEST_CASE("emu bias_backward: column sums match the cpu and are deterministic", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t rows : {1, 3, 65})
      for (int64_t cols : {1, 33, 200}) {  // 200 columns: more bands than the emulator's 4-block grid
        INFO(dtype_name(t) << " rows " << rows << " cols " << cols);
        const Tensor g = Tensor::randn({rows, cols}, uint64_t(rows * cols));
        const Tensor rg = rounded(g, t);
        Tensor ref = Tensor::empty({cols});
        cpu::bias_backward<float>(rg.data<float>(), ref.data<float>(), rows, cols);
        const Tensor eg = on_emu(g, t);
        Tensor db = Tensor::empty({cols}, t, kEmu), db2 = Tensor::empty({cols}, t, kEmu);
        ENGINE_GPU_CALL(kEmu, bias_backward, gpu::storage_of(t), eg.data_ptr(), db.data_ptr(), rows, cols, nullptr);
        ENGINE_GPU_CALL(kEmu, bias_backward, gpu::storage_of(t), eg.data_ptr(), db2.data_ptr(), rows, cols, nullptr);
        CHECK_TOL(db, ref, gemm_tol(t, rows));
        CHECK(values(db.to(kCPU)) == values(db2.to(kCPU)));
      }
}

TEST_CASE("emu tiled_gemm: the bias-gradient epilogue writes op(A)'s row sums beside the product", "[emu][kernels]") {
  // dW = G^T X as a linear layer's backward plans it: A = G stored (K, M),
  // transposed. M = 70 and 130 rows of dbias (ragged row tiles), N = 5 and 130
  // (one and three column tiles: only the first writes dbias), K = 37 (a
  // ragged last k tile, whose padding loads as 0).
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t M : {70, 130})
      for (int64_t N : {5, 130}) {
        INFO(dtype_name(t) << " M " << M << " N " << N);
        const int64_t K = 37;
        GemmCall c;
        c.ta = Trans::T, c.tb = Trans::N, c.M = M, c.N = N, c.K = K, c.lda = M, c.ldb = N, c.ldc = N;
        const Tensor G = Tensor::randn({K, M}, uint64_t(M + N)), X = Tensor::randn({K, N}, uint64_t(M + N + 1));
        Tensor ref = Tensor::zeros({M * N}), ref_db = Tensor::empty({M});
        reference_gemm(c, rounded(G, t), rounded(X, t), Tensor(), ref);
        cpu::bias_backward<float>(rounded(G, t).data<float>(), ref_db.data<float>(), K, M);
        Tensor out = Tensor::full({M * N}, NAN, t, kEmu), db = Tensor::full({M}, NAN, t, kEmu);
        const Tensor eg = on_emu(G, t), ex = on_emu(X, t);
        ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::storage_of(t), c, eg.data_ptr(), ex.data_ptr(), out.data_ptr(),
                        db.data_ptr(), Epilogue::bgrad, nullptr, nullptr);
        CHECK_TOL(out, ref, gemm_tol(t, K));
        CHECK_TOL(db, ref_db, gemm_tol(t, K));
      }
  GemmCall nt;
  nt.ta = Trans::N, nt.M = 4, nt.N = 4, nt.K = 4, nt.lda = 4, nt.ldb = 4, nt.ldc = 4;
  const Tensor z = Tensor::zeros({16}, DType::f32, kEmu), zb = Tensor::zeros({4}, DType::f32, kEmu);
  auto bad = [&] {
    ENGINE_GPU_CALL(kEmu, tiled_gemm, gpu::Storage::f32, nt, z.data_ptr(), z.data_ptr(), z.data_ptr(), zb.data_ptr(),
                    Epilogue::bgrad, nullptr, nullptr);
  };
  CHECK_THROWS_WITH(bad(), Catch::Contains("A transposed, one batch"));
}

namespace {
// matmul with bias, forward and backward (dA, dB, dbias), emu vs cpu.
void check_matmul(const Shape& lead_a, bool shared_b, Trans ta, Trans tb, DType t, uint64_t seed) {
  const int64_t M = 17, K = 33, N = 65;
  Shape sa = lead_a, sb = shared_b ? Shape{} : lead_a;
  sa.push_back(ta == Trans::N ? M : K), sa.push_back(ta == Trans::N ? K : M);
  sb.push_back(tb == Trans::N ? K : N), sb.push_back(tb == Trans::N ? N : K);
  Shape so = lead_a;
  so.push_back(M), so.push_back(N);
  const Tensor a = Tensor::randn(sa, seed), b = Tensor::randn(sb, seed + 1), bias = Tensor::randn({N}, seed + 2);
  const Tensor g = Tensor::randn(so, seed + 3);
  Tensor ra = rounded(a, t).set_requires_grad(true), rb = rounded(b, t).set_requires_grad(true);
  Tensor rbias = rounded(bias, t).set_requires_grad(true);
  Tensor ref = matmul(ra, rb, ta, tb, rbias);
  ref.backward(rounded(g, t));
  Tensor ea = on_emu(a, t).set_requires_grad(true), eb = on_emu(b, t).set_requires_grad(true);
  Tensor ebias = on_emu(bias, t).set_requires_grad(true);
  Tensor out = matmul(ea, eb, ta, tb, ebias);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == t);
  CHECK(out.shape() == so);
  out.backward(on_emu(g, t));
  const double grad_scale = t == DType::f32 ? 1.0 : 4.0;
  const int64_t batch = shape_numel(lead_a);
  CHECK_TOL(out, ref, gemm_tol(t, K));
  CHECK_TOL(ea.grad(), ra.grad(), gemm_tol(t, N, grad_scale));                           // sums over N
  CHECK_TOL(eb.grad(), rb.grad(), gemm_tol(t, (shared_b ? batch : 1) * M, grad_scale));  // over batch*M
  CHECK_TOL(ebias.grad(), rbias.grad(), gemm_tol(t, batch * M, grad_scale));
}
}  // namespace

TEST_CASE("emu matmul: forward and backward with bias, batched and shared B", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T}) {
        INFO(dtype_name(t) << " ta " << int(ta) << " tb " << int(tb));
        {
          INFO("2-D");
          check_matmul({}, true, ta, tb, t, 31);
        }
        {
          INFO("batched (2, 3)");
          check_matmul({2, 3}, false, ta, tb, t, 32);
        }
        {
          INFO("batched (3,) with a shared B");
          check_matmul({3}, true, ta, tb, t, 33);
        }
      }
}

TEST_CASE("emu linear: (B, T, C) input, forward and backward", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(dtype_name(t));
    const Tensor x = Tensor::randn({2, 5, 17}, 41), w = Tensor::randn({33, 17}, 42), b = Tensor::randn({33}, 43);
    const Tensor g = Tensor::randn({2, 5, 33}, 44);
    Tensor rx = rounded(x, t).set_requires_grad(true), rw = rounded(w, t).set_requires_grad(true);
    Tensor rbias = rounded(b, t).set_requires_grad(true);
    Tensor ref = linear(rx, rw, rbias);
    ref.backward(rounded(g, t));
    Tensor ex = on_emu(x, t).set_requires_grad(true), ew = on_emu(w, t).set_requires_grad(true);
    Tensor eb = on_emu(b, t).set_requires_grad(true);
    Tensor out = linear(ex, ew, eb);
    out.backward(on_emu(g, t));
    const double gs = t == DType::f32 ? 1.0 : 4.0;
    CHECK_TOL(out, ref, gemm_tol(t, 17));
    CHECK_TOL(ex.grad(), rx.grad(), gemm_tol(t, 33, gs));
    CHECK_TOL(ew.grad(), rw.grad(), gemm_tol(t, 10, gs));
    CHECK_TOL(eb.grad(), rbias.grad(), gemm_tol(t, 10, gs));
  }
}
