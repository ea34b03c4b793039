// The engine's own single-threaded fp32 GEMM for AVX-512 CPUs, row-major,
// for the products whose op(A) is A as stored (NN and NT):
//   C(M, N) = alpha * A @ op(B) + beta * C,   A (M, K) with row stride lda.
// cpu::gemm (blas_gemm.cpp) tries it on each thread's tile before OpenBLAS.
//
// Why not OpenBLAS there: OpenBLAS copies ("packs") both operands into its
// own layout on every call and first scales C by beta (for beta = 0 it
// writes zeros over C, then its kernel reads them back and adds). A training
// step's products have a short K (128..512 at GPT-2 tiny) against M = the
// batch's rows, so A's copy and C's extra pass are a large part of each
// call. Here A is read where it is (each of a tile's 6 rows broadcast one
// value at a time), only op(B), the small weight, is packed, and C is
// written once (read once more only for beta != 0).
//
// Micro-tile: 6 rows x 64 columns of C, 24 AVX-512 accumulators over all of
// K; per k, 4 vector loads of packed B, 6 broadcasts of A, 24 FMAs.
// flops = 2 M N K; bytes ~ 4 (M K + ceil(M / 6) K N_packed-panel reads from
//   L2 + M N (+ M N for beta != 0)), B packed once per call: 4 K N.
#pragma once
#include <cstdint>

#include "kernels/gemm/gemm.h"

namespace eng::cpu {

// Runs the product and returns true; returns false and touches nothing
// where it does not apply: op(A) transposed, M below kSgemmMinM, K outside
// [1, kSgemmMaxK], this CPU without AVX-512F, a build not for x86-64, or
// turned off (set_sgemm_avx512, or ENGINE_CPU_GEMM=openblas in the
// environment).
// With bias (N values) and/or R (M x N, row stride ldr), each may be null:
//   C = (R + bias) + (alpha A op(B) + beta C)
// added as each tile is stored (linear's bias and linear_residual's residual;
// no pass over C before the product), rounded as OpenBLAS's path rounds
// them: R + bias first, then a beta = 1 product adds onto that.
bool sgemm_avx512(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc, const float* bias = nullptr,
                  const float* R = nullptr, int64_t ldr = 0);

// Fewer rows than this go to OpenBLAS: its small-matrix kernels (attention's
// 32-row products) copy nothing, while here packing B is paid for by too few
// rows. This kernel's speed against OpenBLAS's, one thread, beta = 0
// (docs/cpu_speed.md): 0.45-0.59x at 32 rows, 0.70-1.01x at 64, 1.00-1.07x
// at 128 to 512, 1.0-1.25x at the training step's 1024-row tiles.
constexpr int64_t kSgemmMinM = 128;
// K longer than this goes to OpenBLAS: a packed panel of B (K x 64) must
// stay in L2 while the tiles of all of M pass over it.
constexpr int64_t kSgemmMaxK = 1024;

// Whether this CPU and build can run it (AVX-512F, x86-64), whatever the switch.
bool sgemm_avx512_supported();
// The switch, for tests and benchmarks that compare with OpenBLAS; starts on
// unless ENGINE_CPU_GEMM=openblas. Returns the previous setting.
bool set_sgemm_avx512(bool on);

}  // namespace eng::cpu
