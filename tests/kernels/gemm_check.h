// What the GEMM kernel tests share (test_gemm_emu.cpp, test_linear_gelu_emu.cpp):
// the tolerance of a K-term dot product, a plain row-major GemmCall, the
// buffer sizes a call's strides need, and the cpu reference (OpenBLAS on
// inputs already rounded to the storage type, plus an optional bias row).
#pragma once
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/gemm/gemm.h"
#include "tests/kernels/emu_check.h"

namespace eng::test {

// tol_for(t) with the absolute part scaled by sqrt(K): a K-term dot product
// of unit-variance inputs is ~sqrt(K) in size, and so is the error of
// summing it in another order (see test_gemm_emu.cpp).
inline Tol gemm_tol(DType t, int64_t K, double scale = 1.0) {
  const Tol base = tol_for(t);
  return {base.atol * scale * std::sqrt(double(K < 1 ? 1 : K)), base.rtol * scale};
}

#define CHECK_TOL(dev_tensor, ref_tensor, tol) \
  CHECK_CLOSE(values((dev_tensor).to(kCPU)), values(ref_tensor), (tol).atol, (tol).rtol)

// C (M, N) = op(A) op(B), densely packed, one batch.
inline GemmCall plain_call(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K) {
  GemmCall c;
  c.ta = ta, c.tb = tb, c.M = M, c.N = N, c.K = K;
  c.lda = ta == Trans::N ? K : M, c.ldb = tb == Trans::N ? N : K, c.ldc = N;
  return c;
}

// Elements A, B and C must hold for c's batches, strides and leading dimensions.
struct GemmSizes {
  int64_t a, b, c;
};
inline GemmSizes gemm_sizes(const GemmCall& c) {
  const int64_t rows_a = c.ta == Trans::N ? c.M : c.K, rows_b = c.tb == Trans::N ? c.K : c.N;
  return {(c.batch - 1) * c.stride_a + rows_a * c.lda, (c.batch - 1) * c.stride_b + rows_b * c.ldb,
          (c.batch - 1) * c.stride_c + c.M * c.ldc};
}

// ref = c applied to (ra, rb, ref) on the cpu in f32, then + rbias[n] on every
// row of every batch when rbias is defined. ref holds C's initial values.
inline void reference_gemm(const GemmCall& c, const Tensor& ra, const Tensor& rb, const Tensor& rbias, Tensor& ref) {
  cpu::gemm_call<float>(c, ra.data<float>(), rb.data<float>(), ref.data<float>());
  if (!rbias.defined()) return;
  for (int64_t z = 0; z < c.batch; ++z)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) ref.data<float>()[z * c.stride_c + m * c.ldc + n] += rbias.data<float>()[n];
}

}  // namespace eng::test
