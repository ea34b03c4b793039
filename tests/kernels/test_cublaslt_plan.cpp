// The cuBLASLt argument mapping, checked on the cpu (CI has no GPU, so
// cublasLtMatmul itself never runs here). plan_cublaslt turns a row-major
// GemmCall into the column-major (m, n, k, transa, transb, layouts, batch
// strides, operand order) that kernels/gemm/cublaslt.cpp copies verbatim into
// cuBLASLt's descriptors. Here a column-major reference GEMM with cuBLASLt's
// semantics (including its layout rules and the BIAS / BGRADB / GELU_AUX_BIAS
// epilogues)
// executes the plan, and must give the same C as cpu::gemm_call on the
// row-major call: that proves the mapping, for every transpose, batched,
// shared B (stride 0), padded leading dimensions, ragged sizes, alpha, beta.
// Then every GemmCall matmul itself plans (forward, dA, dB, over batched,
// shared-B and transposed cases) goes to all three executors: OpenBLAS, the
// hand-written GEMM on emu, and the cuBLASLt plan; "the two GPU wrappers
// take the same arguments" is this test.
// Inputs are small integers, so every executor's sums are exact in f32 and
// the comparisons are exact equalities.
#include <cmath>
#include <vector>

#include "engine/ops/matmul_plan.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm/cublaslt.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
using Buf = std::vector<float>;

Buf ints(int64_t n, uint64_t seed) {
  Buf v(size_t(n > 0 ? n : 0));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(int64_t(s >> 33) % 7 - 3);  // -3 .. 3
  }
  return v;
}

// Elements an operand needs: (batch - 1) * stride + the last matrix.
int64_t extent(int64_t rows, int64_t ld, int64_t stride, int64_t batch) { return (batch - 1) * stride + rows * ld; }

// cuBLASLt's layout rules for one operand: op(X) must be (r x c), so the
// stored matrix is (r x c) untransposed or (c x r) transposed, and ld >= rows.
void check_layout(const LtLayout& l, LtOp t, int64_t r, int64_t c) {
  CHECK(l.rows == (t == LtOp::N ? r : c));
  CHECK(l.cols == (t == LtOp::N ? c : r));
  CHECK(l.ld >= l.rows);
}

// GELU, tanh form, in double: the reference for cuBLASLt's GELU epilogues.
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// D = alpha op(A') op(B') + beta C, column-major, with cuBLASLt's semantics,
// then the epilogue: bias (length m, per row of D), BGRADB (out[j] = sum
// over k of op(B')[., j], per column of D; batch 1), or, with `aux`,
// GELU_AUX_BIAS (aux = the biased value at the plan's aux_ld / aux_stride,
// D = its GELU).
void run_col_major(const LtPlan& p, const float* first, const float* second, float* C, const float* bias,
                   float* bias_grad, float* aux = nullptr) {
  check_layout(p.a, p.transa, p.m, p.k);
  check_layout(p.b, p.transb, p.k, p.n);
  CHECK(p.c.rows == p.m);
  CHECK(p.c.cols == p.n);
  CHECK(p.c.ld >= p.c.rows);
  auto at = [](const float* X, const LtLayout& l, LtOp t, int64_t i, int64_t j) {
    return double(t == LtOp::N ? X[i + j * l.ld] : X[j + i * l.ld]);
  };
  for (int64_t z = 0; z < p.batch; ++z) {
    const float* A = first + z * p.a.stride;
    const float* B = second + z * p.b.stride;
    float* D = C + z * p.c.stride;
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < p.k; ++l) acc += at(A, p.a, p.transa, i, l) * at(B, p.b, p.transb, l, j);
        float& d = D[i + j * p.c.ld];
        const double prev = p.beta == 0.f ? 0.0 : double(p.beta) * d;  // beta = 0 never reads C
        const double pre = double(p.alpha) * acc + prev + (bias ? double(bias[i]) : 0.0);
        if (aux) aux[z * p.aux_stride + i + j * p.aux_ld] = float(pre);
        d = float(aux ? gelu_ref(pre) : pre);
      }
  }
  if (bias_grad)
    for (int64_t j = 0; j < p.bias_grad_len; ++j) {
      double s = 0;
      for (int64_t l = 0; l < p.k; ++l) s += at(second, p.b, p.transb, l, j);
      bias_grad[j] = float(s);
    }
}

// Runs c three ways from the same A, B, C0: OpenBLAS (row-major), the plan
// (column-major), and, when `emu`, the hand-written GEMM; all must agree.
void check_call(const GemmCall& c, uint64_t seed, bool emu = false) {
  CAPTURE(int(c.ta), int(c.tb), c.M, c.N, c.K, c.lda, c.ldb, c.ldc, c.stride_a, c.stride_b, c.stride_c, c.batch,
          c.alpha, c.beta);
  const int64_t rows_a = c.ta == Trans::N ? c.M : c.K, rows_b = c.tb == Trans::N ? c.K : c.N;
  const Buf A = ints(extent(rows_a, c.lda, c.stride_a, c.batch), seed);
  const Buf B = ints(extent(rows_b, c.ldb, c.stride_b, c.batch), seed + 1);
  const Buf C0 = ints(extent(c.M, c.ldc, c.stride_c, c.batch), seed + 2);
  Buf ref = C0, lt = C0;
  cpu::gemm_call<float>(c, A.data(), B.data(), ref.data());
  const LtPlan p = plan_cublaslt(c);
  REQUIRE(p.first_is_b);
  run_col_major(p, B.data(), A.data(), lt.data(), nullptr, nullptr);
  CHECK(lt == ref);
  if (emu) {
    Tensor ea = Tensor::from_vector(A, {int64_t(A.size())}).to(kEmu);
    Tensor eb = Tensor::from_vector(B, {int64_t(B.size())}).to(kEmu);
    Tensor ec = Tensor::from_vector(C0, {int64_t(C0.size())}).to(kEmu);
    emuk::tiled_gemm(gpu::Storage::f32, c, ea.data_ptr(), eb.data_ptr(), ec.data_ptr(), nullptr, Epilogue::none,
                     nullptr, nullptr);
    const Tensor back = ec.to(kCPU);
    CHECK(Buf(back.data<float>(), back.data<float>() + back.numel()) == ref);
  }
}

GemmCall make_call(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, int64_t pad, int64_t batch, bool shared_b) {
  GemmCall c;
  c.ta = ta, c.tb = tb, c.M = M, c.N = N, c.K = K, c.batch = batch;
  c.lda = (ta == Trans::N ? K : M) + pad;
  c.ldb = (tb == Trans::N ? N : K) + pad;
  c.ldc = N + pad;
  const int64_t rows_a = ta == Trans::N ? M : K, rows_b = tb == Trans::N ? K : N;
  c.stride_a = rows_a * c.lda + pad;
  c.stride_b = shared_b ? 0 : rows_b * c.ldb;
  c.stride_c = M * c.ldc + 2 * pad;
  return c;
}
}  // namespace

TEST_CASE("cublaslt plan: column-major execution equals the row-major GemmCall", "[gemm]") {
  const int64_t sizes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 1, 33}, {2, 9, 1}, {13, 11, 4}, {1, 6, 5}};
  uint64_t seed = 1;
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (const auto& s : sizes)
        for (int64_t pad : {0, 3})
          for (int64_t batch : {1, 3})
            for (bool shared_b : {false, true}) {
              if (shared_b && batch == 1) continue;
              GemmCall c = make_call(ta, tb, s[0], s[1], s[2], pad, batch, shared_b);
              check_call(c, seed++, pad == 3);  // the hand-written GEMM too, on a subset
              c.alpha = 0.5f, c.beta = 1.f;     // accumulation, as weight gradients use
              check_call(c, seed++);
            }
}

TEST_CASE("cublaslt plan: the swap, the sizes and the rejected calls", "[gemm]") {
  GemmCall c = make_call(Trans::T, Trans::N, 4, 6, 5, 1, 2, true);
  const LtPlan p = plan_cublaslt(c);
  CHECK(p.m == 6);  // m' = N, n' = M: C^T = op(B)^T op(A)^T
  CHECK(p.n == 4);
  CHECK(p.k == 5);
  CHECK(p.transa == LtOp::N);  // cuBLASLt's transa is our tb
  CHECK(p.transb == LtOp::T);  // and its transb our ta
  CHECK(p.a.ld == c.ldb);
  CHECK(p.b.ld == c.lda);
  CHECK(p.a.stride == 0);  // the shared B keeps stride 0
  CHECK(p.bias_len == 6);
  CHECK(p.bias_grad_len == 4);
  GemmCall bad = c;
  bad.lda = 3;  // shorter than A's stored row (M = 4 when transposed)
  CHECK_THROWS_AS(plan_cublaslt(bad), Error);
  bad = c, bad.K = 0;
  CHECK_THROWS_AS(plan_cublaslt(bad), Error);
  CHECK(compute_mode_fits(gpu::Storage::f32, ComputeMode::tf32));
  CHECK_FALSE(compute_mode_fits(gpu::Storage::bf16, ComputeMode::fp32));
  CHECK(default_compute_mode(gpu::Storage::f16) == ComputeMode::fp16);
}

TEST_CASE("cublaslt plan: bias epilogue (per column) and BGRADB (bias gradient) in row-major terms", "[gemm]") {
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T}) {
      const GemmCall c = make_call(ta, tb, 7, 5, 9, 2, 1, false);
      const int64_t rows_a = ta == Trans::N ? c.M : c.K, rows_b = tb == Trans::N ? c.K : c.N;
      const Buf A = ints(extent(rows_a, c.lda, 0, 1), 11), B = ints(extent(rows_b, c.ldb, 0, 1), 12);
      const Buf bias = ints(c.N, 13);
      Buf ref(size_t(c.M * c.ldc), 0.f), lt = ref;
      cpu::gemm_call<float>(c, A.data(), B.data(), ref.data());
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.N; ++n) ref[size_t(m * c.ldc + n)] += bias[size_t(n)];
      const LtPlan p = plan_cublaslt(c);
      Buf bgrad(size_t(p.bias_grad_len));
      run_col_major(p, B.data(), A.data(), lt.data(), bias.data(), bgrad.data());
      CHECK(lt == ref);
      // bgrad = sum over k of op(A)[i, k], i < M.
      for (int64_t i = 0; i < c.M; ++i) {
        float s = 0;
        for (int64_t k = 0; k < c.K; ++k) s += ta == Trans::N ? A[size_t(i * c.lda + k)] : A[size_t(k * c.lda + i)];
        CHECK(bgrad[size_t(i)] == s);
      }
    }
}

// The GemmCalls engine/ops/matmul.cpp plans, run step by step (with their
// operand offsets and beta = 1 steps) by every executor.
TEST_CASE("cublaslt plan: matmul's forward/dA/dB GemmCalls run the same on OpenBLAS, emu and the cuBLASLt plan",
          "[gemm]") {
  using namespace eng::detail;
  struct Case {
    Shape a, b;
    Trans ta, tb;
  };
  const std::vector<Case> cases = {
      {{5, 7}, {7, 3}, Trans::N, Trans::N},       {{7, 5}, {3, 7}, Trans::T, Trans::T},
      {{2, 3, 4}, {5, 4}, Trans::N, Trans::T},  // linear: shared B, folded
      {{2, 4, 3}, {4, 5}, Trans::T, Trans::N},  // shared B, transposed A: per-batch beta = 1
      {{3, 2, 5}, {3, 5, 4}, Trans::N, Trans::N}, {{3, 5, 2}, {3, 4, 5}, Trans::T, Trans::T},
      {{2, 4, 3}, {5, 4}, Trans::T, Trans::T},  // shared B, both transposed
  };
  uint64_t seed = 100;
  for (const Case& k : cases) {
    const Tensor a = Tensor::empty(k.a, DType::f32), b = Tensor::empty(k.b, DType::f32);
    const MatmulDims d = matmul_dims(a, b, k.ta, k.tb);
    CAPTURE(a.desc(), b.desc(), int(k.ta), int(k.tb));
    const Buf A = ints(a.numel(), seed++), B = ints(b.numel(), seed++), G = ints(shape_numel(d.out_shape), seed++);
    const GemmPlan plans[] = {plan_forward(d, k.ta, k.tb), plan_grad_a(d, k.ta, k.tb), plan_grad_b(d, k.ta, k.tb)};
    const int64_t outs[] = {shape_numel(d.out_shape), a.numel(), b.numel()};
    for (int which = 0; which < 3; ++which) {
      CAPTURE(which);
      auto src = [&](Operand o) -> const Buf& { return o == Operand::a ? A : o == Operand::b ? B : G; };
      Buf ref(size_t(outs[which]), 0.f), lt = ref;
      Tensor emu_out = Tensor::zeros({outs[which]}, DType::f32, kEmu);
      for (const GemmStep& s : plans[which]) {
        const float* x = src(s.first).data() + s.offset_first;
        const float* y = src(s.second).data() + s.offset_second;
        cpu::gemm_call<float>(s.call, x, y, ref.data());
        const LtPlan p = plan_cublaslt(s.call);
        run_col_major(p, y, x, lt.data(), nullptr, nullptr);
        const Tensor ex = Tensor::from_vector(src(s.first), {int64_t(src(s.first).size())}).to(kEmu);
        const Tensor ey = Tensor::from_vector(src(s.second), {int64_t(src(s.second).size())}).to(kEmu);
        emuk::tiled_gemm(gpu::Storage::f32, s.call, ex.data<float>() + s.offset_first,
                         ey.data<float>() + s.offset_second, emu_out.data_ptr(), nullptr, Epilogue::none, nullptr,
                         nullptr);
      }
      CHECK(lt == ref);
      const Tensor back = emu_out.to(kCPU);
      CHECK(Buf(back.data<float>(), back.data<float>() + back.numel()) == ref);
      if (which == 2 && bias_grad_fusable(plans[2], d)) {
        // The fused bias gradient (BGRADB on the dW GEMM) is G's column sums.
        const GemmStep& s = plans[2][0];
        Buf scratch(size_t(outs[2]), 0.f), bgrad(size_t(d.N)), want(size_t(d.N));
        run_col_major(plan_cublaslt(s.call), src(s.second).data(), G.data(), scratch.data(), nullptr, bgrad.data());
        cpu::bias_backward<float>(G.data(), want.data(), d.batch * d.M, d.N);
        CHECK(bgrad == want);
      }
    }
  }
  // A linear layer's dW plan is the fusable one.
  const Tensor x = Tensor::empty({2, 3, 4}), w = Tensor::empty({5, 4});
  const MatmulDims d = matmul_dims(x, w, Trans::N, Trans::T);
  CHECK(bias_grad_fusable(plan_grad_b(d, Trans::N, Trans::T), d));
  CHECK_FALSE(bias_grad_fusable(plan_grad_a(d, Trans::N, Trans::T), d));
}

// GELU_AUX_BIAS: the plan lays out aux as C (aux_ld = ldc, aux_stride =
// stride_c), as the hand-written GEMM's gelu_aux_bias does; both get the
// same GemmCall, bias and aux and must store the same pre-activation (exact:
// integer inputs) and the same GELU of it (within fp32 rounding: double
// tanh here, tanhf there). Then the GemmCall linear_gelu plans, and the
// cases cuBLASLt rejects (aux ld or batch stride not a multiple of 8).
TEST_CASE("cublaslt plan: GELU_AUX_BIAS and the hand-written gelu_aux_bias take the same arguments", "[gemm]") {
  using namespace eng::detail;
  auto check_gelu = [](const GemmCall& c, uint64_t seed) {
    CAPTURE(int(c.ta), int(c.tb), c.M, c.N, c.K, c.ldc, c.stride_c, c.batch);
    const int64_t rows_a = c.ta == Trans::N ? c.M : c.K, rows_b = c.tb == Trans::N ? c.K : c.N;
    const Buf A = ints(extent(rows_a, c.lda, c.stride_a, c.batch), seed);
    const Buf B = ints(extent(rows_b, c.ldb, c.stride_b, c.batch), seed + 1);
    const Buf C0 = ints(extent(c.M, c.ldc, c.stride_c, c.batch), seed + 2), bias = ints(c.N, seed + 3);
    // Row-major reference pre-activation; the padding stays 0 everywhere.
    Buf pre(C0.size(), 0.f);
    cpu::gemm_call<float>(c, A.data(), B.data(), pre.data());
    for (int64_t z = 0; z < c.batch; ++z)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.N; ++n) pre[size_t(z * c.stride_c + m * c.ldc + n)] += bias[size_t(n)];
    const LtPlan p = plan_cublaslt(c);
    CHECK(p.aux_ld == c.ldc);
    CHECK(p.aux_stride == c.stride_c);
    Buf lt = C0, lt_aux(C0.size(), 0.f);
    run_col_major(p, B.data(), A.data(), lt.data(), bias.data(), nullptr, lt_aux.data());
    CHECK(lt_aux == pre);
    auto on_emu32 = [](const Buf& v) { return Tensor::from_vector(v, {int64_t(v.size())}).to(kEmu); };
    const Tensor ea = on_emu32(A), eb = on_emu32(B), ebias = on_emu32(bias);
    Tensor ec = on_emu32(C0), eaux = on_emu32(Buf(C0.size(), 0.f));
    emuk::tiled_gemm(gpu::Storage::f32, c, ea.data_ptr(), eb.data_ptr(), ec.data_ptr(), ebias.data_ptr(),
                     Epilogue::gelu_aux_bias, eaux.data_ptr(), nullptr);
    CHECK(values(eaux.to(kCPU)) == std::vector<double>(lt_aux.begin(), lt_aux.end()));
    CHECK_CLOSE(values(ec.to(kCPU)), std::vector<double>(lt.begin(), lt.end()), 1e-5, 1e-5);
  };
  uint64_t seed = 300;
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (int64_t batch : {1, 3})
        for (int64_t pad : {0, 3}) check_gelu(make_call(ta, tb, 7, 5, 9, pad, batch, batch > 1), seed += 4);
  // linear_gelu's forward: matmul's plan for x (2, 3, 4) @ W (5, 4)^T, one folded step.
  const Tensor x = Tensor::empty({2, 3, 4}), w = Tensor::empty({5, 4});
  const GemmPlan fwd = plan_forward(matmul_dims(x, w, Trans::N, Trans::T), Trans::N, Trans::T);
  REQUIRE(fwd.size() == 1);
  check_gelu(fwd[0].call, 400);
  // What cuBLASLt accepts for the aux matrix: ld and batch stride multiples of 8.
  CHECK(lt_aux_ok(plan_cublaslt(make_call(Trans::N, Trans::T, 3, 16, 4, 0, 1, false))));
  CHECK_FALSE(lt_aux_ok(plan_cublaslt(make_call(Trans::N, Trans::T, 3, 12, 4, 0, 1, false))));
  GemmCall batched = make_call(Trans::N, Trans::T, 3, 16, 4, 0, 2, true);
  CHECK(lt_aux_ok(plan_cublaslt(batched)));  // stride_c = 48
  batched.stride_c += 4;
  CHECK_FALSE(lt_aux_ok(plan_cublaslt(batched)));
}
