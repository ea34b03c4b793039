// The GEMM's GELU epilogue (kernels/cuda/gemm.cu) and the op built on it,
// linear_gelu (engine/ops/linear_gelu.cpp), on the emu device:
//  - the launcher: gelu_aux_bias writes aux = the pre-activation rounded to
//    storage (against OpenBLAS + bias on rounded inputs) and C = GELU of
//    exactly that aux (bit for bit what gelu_forward makes of it), for every
//    transpose, ragged M/N/K, a strided batch and padded leading dimensions;
//    gelu_bias (no aux) stores the same C;
//  - linear_gelu forward and backward vs the cpu reference, f32 and bf16,
//    (B, T, C) inputs whose rows and columns are not multiples of the 64x64
//    tile; the reference rounds the pre-activation (and its gradient) to the
//    storage type where the emu kernels store it;
//  - fused == unfused: linear_gelu equals gelu(linear(...)) bit for bit,
//    forward and every gradient, in f32, bf16 and f16, and so does the MLP
//    under O2 against its casts written out by hand.
// Tolerances as tests/kernels/test_gemm_emu.cpp (atol scaled by sqrt(K)).
// Where the suite reruns on a real GPU (ENGINE_TEST_GPU_DEVICE=cuda), the
// op goes through cuBLASLt, whose GELU starts from the unrounded fp32 value:
// the bitwise checks become tolerance checks there.
#include <cmath>

#include "engine/nn/layers.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/gemm.h"
#include "tests/kernels/gemm_check.h"

using namespace eng;
using namespace eng::test;

namespace {
// Bitwise on emu; on a real GPU within the dtype's tolerance.
#define CHECK_SAME(fused, unfused, t)                                       \
  do {                                                                      \
    if (kEmu.type == DeviceType::emu)                                       \
      CHECK(values((fused).to(kCPU)) == values((unfused).to(kCPU)));        \
    else                                                                    \
      CHECK_TOL(fused, (unfused).to(kCPU).to(DType::f32), gemm_tol(t, 64)); \
  } while (0)

// One GemmCall with the GELU epilogue on the kernel-test device (storage t)
// against OpenBLAS + bias on the cpu (f32, inputs rounded to t).
void check_gelu_call(const GemmCall& c, DType t, uint64_t seed) {
  const gpu::Storage st = gpu::storage_of(t);
  const GemmSizes n = gemm_sizes(c);
  const int64_t nc = n.c;
  const Tensor A = Tensor::randn({n.a}, seed), B = Tensor::randn({n.b}, seed + 1),
               bias = Tensor::randn({c.N}, seed + 2);
  const Tensor ra = rounded(A, t), rb = rounded(B, t), rbias = rounded(bias, t);
  Tensor pre = Tensor::zeros({nc});
  reference_gemm(c, ra, rb, rbias, pre);
  // The padding between rows and batches is never written: both start as 0.
  const Tensor ea = on_emu(A, t), eb = on_emu(B, t), ebias = on_emu(bias, t);
  Tensor out = Tensor::zeros({nc}, t, kEmu), aux = Tensor::zeros({nc}, t, kEmu), out2 = Tensor::zeros({nc}, t, kEmu);
  ENGINE_GPU_CALL(kEmu, tiled_gemm, st, c, ea.data_ptr(), eb.data_ptr(), out.data_ptr(), ebias.data_ptr(),
                  Epilogue::gelu_aux_bias, aux.data_ptr(), nullptr);
  ENGINE_GPU_CALL(kEmu, tiled_gemm, st, c, ea.data_ptr(), eb.data_ptr(), out2.data_ptr(), ebias.data_ptr(),
                  Epilogue::gelu_bias, nullptr, nullptr);
  CHECK_TOL(aux, pre, gemm_tol(t, c.K));
  // C is GELU of the stored aux: what the elementwise GELU makes of it.
  Tensor want = Tensor::zeros({nc}, t, kEmu);
  ENGINE_GPU_CALL(kEmu, gelu_forward, st, aux.data_ptr(), want.data_ptr(), nc, nullptr);
  CHECK_SAME(out, want, t);
  CHECK_SAME(out2, want, t);
}

}  // namespace

TEST_CASE("emu tiled_gemm: GELU epilogue stores the rounded pre-activation and its GELU", "[emu][kernels]") {
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 17, 33}, {65, 70, 17}, {70, 65, 0}};  // K = 0: gelu(bias)
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (Trans ta : {Trans::N, Trans::T})
      for (Trans tb : {Trans::N, Trans::T})
        for (const auto& s : shapes) {
          INFO(dtype_name(t) << " ta " << int(ta) << " tb " << int(tb) << " M " << s[0] << " N " << s[1] << " K "
                             << s[2]);
          check_gelu_call(plain_call(ta, tb, s[0], s[1], s[2]), t, uint64_t(s[0] + 5 * s[1] + 7 * s[2]));
        }
    INFO(dtype_name(t) << ": strided batch with padded rows");
    GemmCall c = plain_call(Trans::N, Trans::T, 17, 33, 20);
    c.lda += 3, c.ldc += 5, c.beta = 0.f;
    c.batch = 3, c.stride_a = c.M * c.lda, c.stride_b = 0, c.stride_c = c.M * c.ldc + 2;
    check_gelu_call(c, t, 91);
  }
}

TEST_CASE("emu tiled_gemm: epilogue arguments are checked", "[emu][kernels]") {
  const GemmCall c = plain_call(Trans::N, Trans::T, 2, 3, 4);
  Tensor a = Tensor::zeros({8}, DType::f32, kEmu), o = Tensor::zeros({8}, DType::f32, kEmu);
  const gpu::Storage st = gpu::Storage::f32;
  const auto call = [&](const void* bias, Epilogue epi, void* aux) {
    ENGINE_GPU_CALL(kEmu, tiled_gemm, st, c, a.data_ptr(), a.data_ptr(), o.data_ptr(), bias, epi, aux, nullptr);
  };
  CHECK_THROWS_WITH(call(nullptr, Epilogue::gelu_aux_bias, o.data_ptr()), Catch::Contains("bias pointer"));
  CHECK_THROWS_WITH(call(a.data_ptr(), Epilogue::gelu_aux_bias, nullptr), Catch::Contains("aux"));
  CHECK_THROWS_WITH(call(a.data_ptr(), Epilogue::bgrad, nullptr), Catch::Contains("bias-gradient"));
}

TEST_CASE("emu linear_gelu: (B, T, C) input, forward and backward vs the cpu", "[emu][kernels]") {
  // 3 x 23 = 69 rows and 67 outputs: two 64x64 tiles each way, both ragged.
  const Shape shapes[][2] = {{{2, 5, 17}, {33, 17}}, {{3, 23, 19}, {67, 19}}};
  for (DType t : {DType::f32, DType::bf16})
    for (const auto& s : shapes) {
      INFO(dtype_name(t) << " x " << shape_str(s[0]) << " w " << shape_str(s[1]));
      const int64_t N = s[1][0], K = s[1][1], rows = s[0][0] * s[0][1];
      Shape so = s[0];
      so.back() = N;
      const Tensor x = Tensor::randn(s[0], 51), w = Tensor::randn(s[1], 52), b = Tensor::randn({N}, 53);
      const Tensor g = Tensor::randn(so, 54);
      // The reference stores the pre-activation in t, as the kernels do (the
      // cast is recorded, so its gradient is rounded to t too).
      Tensor rx = rounded(x, t).set_requires_grad(true), rw = rounded(w, t).set_requires_grad(true);
      Tensor rb = rounded(b, t).set_requires_grad(true);
      Tensor ref = gelu(linear(rx, rw, rb).to(t).to(DType::f32));
      ref.backward(rounded(g, t));
      Tensor ex = on_emu(x, t).set_requires_grad(true), ew = on_emu(w, t).set_requires_grad(true);
      Tensor eb = on_emu(b, t).set_requires_grad(true);
      Tensor out = linear_gelu(ex, ew, eb);
      CHECK(out.device() == kEmu);
      CHECK(out.dtype() == t);
      CHECK(out.shape() == so);
      out.backward(on_emu(g, t));
      const double gs = t == DType::f32 ? 1.0 : 4.0;
      CHECK_TOL(out, ref, gemm_tol(t, K));
      CHECK_TOL(ex.grad(), rx.grad(), gemm_tol(t, N, gs));
      CHECK_TOL(ew.grad(), rw.grad(), gemm_tol(t, rows, gs));
      CHECK_TOL(eb.grad(), rb.grad(), gemm_tol(t, rows, gs));
    }
}

TEST_CASE("emu linear_gelu: equals linear then gelu bit for bit, forward and backward", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const Tensor x = Tensor::randn({3, 23, 19}, 61), w = Tensor::randn({67, 19}, 62), b = Tensor::randn({67}, 63);
    const Tensor g = on_emu(Tensor::randn({3, 23, 67}, 64), t);
    Tensor fx = on_emu(x, t).set_requires_grad(true), fw = on_emu(w, t).set_requires_grad(true);
    Tensor fb = on_emu(b, t).set_requires_grad(true);
    Tensor ux = on_emu(x, t).set_requires_grad(true), uw = on_emu(w, t).set_requires_grad(true);
    Tensor ub = on_emu(b, t).set_requires_grad(true);
    Tensor fused = linear_gelu(fx, fw, fb), unfused = gelu(linear(ux, uw, ub));
    fused.backward(g);
    unfused.backward(g);
    CHECK_SAME(fused, unfused, t);
    CHECK_SAME(fx.grad(), ux.grad(), t);
    CHECK_SAME(fw.grad(), uw.grad(), t);
    CHECK_SAME(fb.grad(), ub.grad(), t);
  }
  // A 1-D input (one token) goes through the same op.
  const Tensor x1 = Tensor::randn({19}, 65).to(kEmu), w = Tensor::randn({5, 19}, 66).to(kEmu);
  const Tensor b = Tensor::randn({5}, 67).to(kEmu);
  CHECK(linear_gelu(x1, w, b).shape() == Shape{5});
  CHECK_SAME(linear_gelu(x1, w, b), gelu(linear(x1, w, b)), DType::f32);
}

TEST_CASE("emu linear_gelu: the MLP under O0 and O2 stores what linear then gelu stored", "[emu][kernels]") {
  for (Precision p : {Precision::O0, Precision::O2}) {
    INFO(precision_name(p));
    const Autocast ac(p);
    MLP mlp(19, 70, 3, Activation::gelu, InitOptions{7, DType::f32, kEmu, 0.f});
    const Tensor x = Tensor::randn({2, 5, 19}, 71).to(kEmu);
    Tensor fused = mlp.forward(x, ac);
    ac.f32(fused).backward(Tensor::full(fused.shape(), 0.25, DType::f32, kEmu));
    std::vector<Tensor> grads;
    for (const auto& np : mlp.named_parameters()) grads.push_back(np.second.grad().clone());
    mlp.zero_grad();
    // MLP::forward before linear_gelu, casts and all.
    Tensor unfused = mlp.fc2->forward(ac.cast(gelu(mlp.fc1->forward(x, ac))), ac);
    ac.f32(unfused).backward(Tensor::full(unfused.shape(), 0.25, DType::f32, kEmu));
    CHECK(fused.dtype() == (p == Precision::O2 ? DType::bf16 : DType::f32));
    CHECK_SAME(fused, unfused, fused.dtype());
    const auto params = mlp.named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].first);
      CHECK_SAME(grads[i], params[i].second.grad(), DType::f32);
    }
  }
}
