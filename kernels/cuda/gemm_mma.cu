// The GEMM ladder's tensor-core rung (docs/kernels/gemm.md): C = op(A) op(B)
// in bf16 or f16 with fp32 accumulation on mma.sync, GemmCall's row-major
// layout and transposes (batch 1, alpha 1, beta 0, C in the storage type).
// Reference: kernels/gemm/blas_gemm.cpp. Instructions:
// kernels/cuda/tensor_core.cuh (docs/emulator.md, "Tensor cores", draws the
// fragments).
//
// A block computes a 64 x 64 tile of C with 4 warps, each a 32 x 32 quarter:
// 2 x 4 mma tiles of 16 x 8, 32 fp32 accumulators a lane. Along K, 32 at a
// time, the block's 128 threads copy the A and B tiles into shared memory
// with cp.async (16 bytes = 8 elements a copy, zero-filled past the matrix
// edges), two stages deep: the copy of step s + 1 is in flight while the
// warps multiply step s. Each operand is kept in shared memory as it lies
// in global memory (k contiguous or m/n contiguous), rows padded by 8
// elements (16 bytes) so that ldmatrix's eight rows fall in different banks;
// ldmatrix.trans turns an m- or n-contiguous tile into the fragments mma wants.
// bytes = 2 (M K ceil(N/64) + K N ceil(M/64)) + 2 M N; flops = 2 M N K.
// Preconditions (the launcher checks): lda, ldb multiples of 8 elements and
// A, B 16-byte aligned (cp.async copies aligned 16-byte chunks).
#include <type_traits>

#include "kernels/cuda/gemm_mma.h"
#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kBM = 64, kBN = 64, kBK = 32, kPad = 8, kThreads = 128;
// One stage of one operand: [64][32 + 8] (k contiguous) or [32][64 + 8].
constexpr int kStageElems = (kBM * (kBK + kPad) > kBK * (kBM + kPad)) ? kBM * (kBK + kPad) : kBK * (kBM + kPad);

// Copies the 64 x 32 tile of op(X) at (row0, k0) into one stage. X is [rows, K]
// with k contiguous (kKMajor: the smem tile is [64][40]) or [K, rows] with
// rows contiguous (the smem tile is [32][72]); 256 chunks of 8, two a thread.
template <typename T, bool kKMajor>
__device__ __forceinline__ void load_tile(T* stage, const T* X, int64_t ld, int64_t rows, int64_t K, int64_t row0,
                                          int64_t k0) {
  for (int c = int(threadIdx.x); c < 256; c += kThreads) {
    // (r, k) of the chunk's first element, in the tile and in X.
    const int r = kKMajor ? c / 4 : (c % 8) * 8, k = kKMajor ? (c % 4) * 8 : c / 8;
    const int64_t gr = row0 + r, gk = k0 + k;
    // Elements of the chunk inside the matrix, along its contiguous axis.
    int64_t valid = kKMajor ? (gr < rows ? K - gk : 0) : (gk < K ? rows - gr : 0);
    valid = valid < 0 ? 0 : valid > 8 ? 8 : valid;
    const T* src = valid ? (kKMajor ? X + gr * ld + gk : X + gk * ld + gr) : X;
    T* dst = kKMajor ? stage + r * (kBK + kPad) + k : stage + k * (kBM + kPad) + r;
    tc::cp_async_cg(tc::smem_addr(dst), src, int(valid) * 2);
  }
}

template <typename T, bool kTA, bool kTB>
__global__ void __launch_bounds__(kThreads)
    gemm_mma_kernel(GemmCall g, const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C) {
  __shared__ __align__(16) T As[2][kStageElems];
  __shared__ __align__(16) T Bs[2][kStageElems];
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // the warp's quarter of the block tile
  const int64_t bm = int64_t(blockIdx.y) * kBM, bn = int64_t(blockIdx.x) * kBN;
  // A is k-contiguous unless transposed; B is k-contiguous only when transposed.
  const auto load = [&](int s, int64_t k0) {
    load_tile<T, !kTA>(As[s], A, g.lda, g.M, g.K, bm, k0);
    load_tile<T, kTB>(Bs[s], B, g.ldb, g.N, g.K, bn, k0);
    tc::cp_async_commit();
  };
  float acc[2][4][4] = {};
  const int64_t steps = (g.K + kBK - 1) / kBK;
  load(0, 0);
  for (int64_t s = 0; s < steps; ++s) {
    if (s + 1 < steps) {
      load(int((s + 1) % 2), (s + 1) * kBK);
      tc::cp_async_wait_group<1>();
    } else {
      tc::cp_async_wait_group<0>();
    }
    __syncthreads();
    const T* as = As[s % 2];
    const T* bs = Bs[s % 2];
    const int j = lane / 8, r = lane % 8;  // this lane addresses row r of ldmatrix's matrix j
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a[2][4], b[4][2];
      for (int mi = 0; mi < 2; ++mi) {
        // Matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) = a0a1, a2a3, a4a5, a6a7.
        const int m = wm + mi * 16 + r + 8 * (j & 1), k = kk + 8 * (j >> 1);
        if constexpr (!kTA)
          tc::ldmatrix_x4(a[mi], tc::smem_addr(as + m * (kBK + kPad) + k));
        else  // the tile is [k][m]: row r of matrix j is k + r, from column m - r
          tc::ldmatrix_x4_trans(a[mi], tc::smem_addr(as + (k + r) * (kBM + kPad) + (m - r)));
      }
      for (int np = 0; np < 2; ++np) {
        // Two n8 tiles: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0b1, b2b3 of each.
        const int n = wn + np * 16 + r + 8 * (j >> 1), k = kk + 8 * (j & 1);
        uint32_t q[4];
        if constexpr (kTB)
          tc::ldmatrix_x4(q, tc::smem_addr(bs + n * (kBK + kPad) + k));
        else  // the tile is [k][n]
          tc::ldmatrix_x4_trans(q, tc::smem_addr(bs + (k + r) * (kBN + kPad) + (n - r)));
        b[2 * np][0] = q[0], b[2 * np][1] = q[1], b[2 * np + 1][0] = q[2], b[2 * np + 1][1] = q[3];
      }
      for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni) tc::mma_m16n8k16<T>(acc[mi][ni], a[mi], b[ni]);
    }
    __syncthreads();  // this stage is refilled by step s + 2's copies
  }
  const int gq = lane / 4, t = lane % 4;
  for (int mi = 0; mi < 2; ++mi)
    for (int ni = 0; ni < 4; ++ni)
      for (int i = 0; i < 4; ++i) {
        const int64_t row = bm + wm + mi * 16 + gq + 8 * (i >> 1), col = bn + wn + ni * 8 + 2 * t + (i & 1);
        if (row < g.M && col < g.N) C[row * g.ldc + col] = from_f32<T>(acc[mi][ni][i]);
      }
}
}  // namespace

void gemm_mma(gpu::Storage st, const GemmCall& g, const void* A, const void* B, void* C, void* stream) {
  ENGINE_CHECK(st != gpu::Storage::f32, "gemm_mma: tensor cores take bf16 or f16 operands, not f32");
  ENGINE_CHECK(g.batch == 1 && g.alpha == 1.f && g.beta == 0.f && !g.out_f32,
               "gemm_mma: one product, alpha 1, beta 0, C in the operands' type");
  ENGINE_CHECK(g.lda % 8 == 0 && g.ldb % 8 == 0 && aligned16(A, B), "gemm_mma: lda ", g.lda, " and ldb ", g.ldb,
               " must be multiples of 8 elements and A, B 16-byte aligned (cp.async copies 16-byte chunks)");
  if (g.M == 0 || g.N == 0) return;
  const dim3 grid(unsigned((g.N + kBN - 1) / kBN), unsigned((g.M + kBM - 1) / kBM));
  dispatch_storage(st, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, float>) {
      const T* a = static_cast<const T*>(A);
      const T* b = static_cast<const T*>(B);
      T* c = static_cast<T*>(C);
      const bool ta = g.ta == Trans::T, tb = g.tb == Trans::T;
      if (!ta && !tb)
        LAUNCH_KERNEL((gemm_mma_kernel<T, false, false>), grid, kThreads, 0, as_stream(stream), g, a, b, c);
      if (!ta && tb) LAUNCH_KERNEL((gemm_mma_kernel<T, false, true>), grid, kThreads, 0, as_stream(stream), g, a, b, c);
      if (ta && !tb) LAUNCH_KERNEL((gemm_mma_kernel<T, true, false>), grid, kThreads, 0, as_stream(stream), g, a, b, c);
      if (ta && tb) LAUNCH_KERNEL((gemm_mma_kernel<T, true, true>), grid, kThreads, 0, as_stream(stream), g, a, b, c);
    }
  });
}

}  // namespace eng::ENGINE_GPU_NS
