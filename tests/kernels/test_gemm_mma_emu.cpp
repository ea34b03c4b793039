// The tensor-core GEMM rung (kernels/cuda/gemm_mma.cu) against the cpu
// reference (OpenBLAS in f32 on inputs rounded to the storage type), every
// transpose, bf16 and f16, at shapes whose M, N and K are not multiples of
// the 64 x 64 x 32 tile nor of a 16 x 8 x 16 mma (ragged edges come in
// through cp.async's zero fill), with leading dimensions wider than the rows.
// Tolerance: gemm_check.h's (fp32 sums in another order, one rounding).
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
          ENGINE_GPU_CALL(kEmu, gemm_mma, gpu::storage_of(t), g, da.data_ptr(), db.data_ptr(), dc.data_ptr(), nullptr);
          CHECK_TOL(dc, ref, gemm_tol(t, s.K));
        }
}

TEST_CASE("emu gemm_mma: refuses what cp.async cannot copy", "[emu][kernels]") {
  GemmCall g = plain_call(Trans::N, Trans::T, 8, 8, 12);  // lda = ldb = 12: rows not on 16 bytes
  const Tensor a = on_emu(Tensor::randn({96}, 1), DType::bf16), b = on_emu(Tensor::randn({96}, 2), DType::bf16);
  Tensor c = Tensor::zeros({64}, DType::bf16, kEmu);
  const auto call = [&] {
    ENGINE_GPU_CALL(kEmu, gemm_mma, gpu::Storage::bf16, g, a.data_ptr(), b.data_ptr(), c.data_ptr(), nullptr);
  };
  CHECK_THROWS_WITH(call(), Catch::Matchers::Contains("lda 12 and ldb 12 must be multiples of 8"));
}
