// The GEMM ladder's tensor-core rung (docs/kernels/gemm.md): tiled_gemm's
// contract (kernels/cuda/gemm.h: GemmCall's row-major layout, transposes,
// batch, alpha, beta, every Epilogue, an fp32 C for weight gradients) for
// bf16 and f16 operands, with the product on mma.sync and fp32
// accumulation. Reference: kernels/gemm/blas_gemm.cpp. Instructions:
// kernels/cuda/tensor_core.cuh (docs/emulator.md, "Tensor cores", draws the
// fragments); the epilogue is gemm.cu's (gemm_epilogue.cuh).
//
// A block computes a 64 x 64 tile of C with 4 warps, each a 32 x 32 quarter:
// 2 x 4 mma tiles of 16 x 8, 32 fp32 accumulators a lane. Along K, 32 at a
// time, the block's 128 threads copy the A and B tiles into shared memory
// with cp.async (16 bytes = 8 elements a copy, zero-filled past the matrix
// edges), kStages deep: the copies of the next kStages - 1 steps are in
// flight while the warps multiply this one. Each operand is kept in shared
// memory as it lies in global memory (k contiguous: [64][32], or m/n
// contiguous: [32][64]), its 16-byte chunks swizzled (swz below) so that
// the eight rows one ldmatrix reads fall in eight different bank groups
// without padding; ldmatrix.trans turns an m- or n-contiguous tile into the
// fragments mma wants. Bias gradient (bgrad, A transposed): the first column
// of blocks sums op(A)'s rows from the shared tiles as they pass, in k order.
// bytes = 2 (M K ceil(N/64) + K N ceil(M/64)) + sizeof(C) M N (x2 with beta)
//   + the epilogue's (gemm_epilogue.cuh), per batch; flops = 2 M N K per batch.
// Preconditions (the launcher checks): tiled_gemm's, and lda, ldb multiples
// of 8 elements with A, B (and every batch's stride) 16-byte aligned
// (cp.async copies aligned 16-byte chunks).
#include <type_traits>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/gemm_mma.h"
#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kBM = 64, kBN = 64, kBK = 32, kThreads = 128, kStages = 3;
static_assert(kBM == kBN, "one tile shape, [64][32] or [32][64], serves both operands");
// One stage of one operand: 64 x 32 elements, 4 KB in bf16/f16.
constexpr int kStageElems = kBM * kBK;

// The element offset of (row, col) in a stage, its 16-byte chunks (8
// elements) XOR-swizzled. k-major tile [64][32]: a row is 4 chunks, two
// rows share a 128-byte line of the 32 banks; chunk c of row r goes to
// c ^ ((r / 2) % 4), so rows r..r+7 at one chunk (an ldmatrix) land in 8
// different (line half, chunk) bank groups. m/n-major tile [32][64]: a row
// is a whole line of 8 chunks; chunk c of row r goes to c ^ (r % 8). The
// column of a chunk start stays a chunk start, which ldmatrix and cp.async
// need (16-byte rows).
template <bool kKMajor>
__device__ __forceinline__ int swz(int row, int col) {
  if constexpr (kKMajor)
    return row * kBK + ((((col >> 3) ^ (row >> 1)) & 3) << 3) + (col & 7);
  else
    return row * kBM + ((((col >> 3) ^ row) & 7) << 3) + (col & 7);
}

// Copies the 64 x 32 tile of op(X) at (row0, k0) into one stage. X is [rows, K]
// with k contiguous (kKMajor: the smem tile is [64][32]) or [K, rows] with
// rows contiguous (the smem tile is [32][64]); 256 chunks of 8, two a thread.
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
    T* dst = kKMajor ? stage + swz<true>(r, k) : stage + swz<false>(k, r);
    tc::cp_async_cg(tc::smem_addr(dst), src, int(valid) * 2);
  }
}

// __launch_bounds__'s 2 blocks an SM: without it ptxas held the NT kernel
// to 96 registers and spilled (CUDA 13, sm_80); with it, 124-153 and none.
template <typename T, typename TC, bool kTA, bool kTB>
__global__ void __launch_bounds__(kThreads, 2)
    gemm_mma_kernel(GemmCall g, const T* __restrict__ A, const T* __restrict__ B, TC* __restrict__ C,
                    const T* __restrict__ bias, Epilogue epi, T* __restrict__ aux, TC* __restrict__ dbias) {
  __shared__ __align__(16) T As[kStages][kStageElems];
  __shared__ __align__(16) T Bs[kStages][kStageElems];
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;  // the warp's quarter of the block tile
  const int64_t bm = int64_t(blockIdx.y) * kBM, bn = int64_t(blockIdx.x) * kBN;
  // bgrad: thread t < 64 of a first-column block sums row bm + t of op(A) (A is [K][M]: its tile is [k][m]).
  const bool bgrad = kTA && dbias != nullptr && blockIdx.x == 0 && threadIdx.x < kBM;
  const int64_t steps = (g.K + kBK - 1) / kBK;
  for (int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const T* a = A + z * g.stride_a;
    const T* b = B + z * g.stride_b;
    // A is k-contiguous unless transposed; B is k-contiguous only when transposed.
    // Every thread commits a group per step, empty past K, so wait_group counts alike.
    const auto load = [&](int64_t step) {
      if (step < steps) {
        load_tile<T, !kTA>(As[step % kStages], a, g.lda, g.M, g.K, bm, step * kBK);
        load_tile<T, kTB>(Bs[step % kStages], b, g.ldb, g.N, g.K, bn, step * kBK);
      }
      tc::cp_async_commit();
    };
    float acc[2][4][4] = {};
    float row_sum = 0.f;
    for (int s = 0; s < kStages - 1; ++s) load(s);
    for (int64_t s = 0; s < steps; ++s) {
      tc::cp_async_wait_group<kStages - 2>();  // step s's copies have landed (this thread's)
      __syncthreads();                         // ... and every thread's; step s - 1's stage is free
      load(s + kStages - 1);
      const T* as = As[s % kStages];
      const T* bs = Bs[s % kStages];
      if (bgrad)  // elements past K and M were zero-filled
#pragma unroll 1
        for (int kk = 0; kk < kBK; ++kk) row_sum += to_f32(as[swz<false>(kk, int(threadIdx.x))]);
      const int j = lane / 8, r = lane % 8;  // this lane addresses row r of ldmatrix's matrix j
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 16) {
        uint32_t af[2][4], bf[4][2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          // Matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) = a0a1, a2a3, a4a5, a6a7.
          const int m = wm + mi * 16 + r + 8 * (j & 1), k = kk + 8 * (j >> 1);
          if constexpr (!kTA)
            tc::ldmatrix_x4(af[mi], tc::smem_addr(as + swz<true>(m, k)));
          else  // the tile is [k][m]: row r of matrix j is k + r, from column m - r
            tc::ldmatrix_x4_trans(af[mi], tc::smem_addr(as + swz<false>(k + r, m - r)));
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          // Two n8 tiles: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0b1, b2b3 of each.
          const int n = wn + np * 16 + r + 8 * (j >> 1), k = kk + 8 * (j & 1);
          uint32_t q[4];
          if constexpr (kTB)
            tc::ldmatrix_x4(q, tc::smem_addr(bs + swz<true>(n, k)));
          else  // the tile is [k][n]
            tc::ldmatrix_x4_trans(q, tc::smem_addr(bs + swz<false>(k + r, n - r)));
          bf[2 * np][0] = q[0], bf[2 * np][1] = q[1], bf[2 * np + 1][0] = q[2], bf[2 * np + 1][1] = q[3];
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) tc::mma_m16n8k16<T>(acc[mi][ni], af[mi], bf[ni]);
      }
    }
    tc::cp_async_wait_all();  // the empty groups past K
    __syncthreads();          // the next batch index refills the stages
    TC* cz = C + z * g.stride_c;
    T* auxz = aux != nullptr ? aux + z * g.stride_c : nullptr;
    const int gq = lane / 4, t = lane % 4;
    // Unrolled: acc stays in registers only if every index is a constant.
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t row = bm + wm + mi * 16 + gq + 8 * (i >> 1), col = bn + wn + ni * 8 + 2 * t + (i & 1);
          if (row < g.M && col < g.N)
            store_with_epilogue<T, TC>(cz, row * g.ldc + col, acc[mi][ni][i], g, epi, bias, col, auxz);
        }
    if (bgrad && bm + threadIdx.x < g.M) dbias[bm + threadIdx.x] = from_f32<TC>(row_sum);
  }
}

template <typename T, typename TC, bool kTA, bool kTB>
void launch(const GemmCall& g, const void* A, const void* B, void* C, const void* bias, Epilogue epi, void* aux,
            void* stream) {
  const dim3 grid(unsigned((g.N + kBN - 1) / kBN), unsigned((g.M + kBM - 1) / kBM),
                  unsigned(g.batch < 65535 ? g.batch : 65535));
  // bgrad writes the launcher's bias pointer (cuBLASLt's convention): the kernel's dbias.
  const bool bgrad = epi == Epilogue::bgrad;
  LAUNCH_KERNEL((gemm_mma_kernel<T, TC, kTA, kTB>), grid, kThreads, 0, as_stream(stream), g, static_cast<const T*>(A),
                static_cast<const T*>(B), static_cast<TC*>(C), bgrad ? nullptr : static_cast<const T*>(bias), epi,
                static_cast<T*>(aux), bgrad ? static_cast<TC*>(const_cast<void*>(bias)) : nullptr);
}
}  // namespace

void gemm_mma(gpu::Storage st, const GemmCall& g, const void* A, const void* B, void* C, const void* bias, Epilogue epi,
              void* aux, void* stream) {
  ENGINE_CHECK(st != gpu::Storage::f32, "gemm_mma: tensor cores take bf16 or f16 operands, not f32");
  check_gemm_args("gemm_mma", st, g, bias, epi, aux);
  ENGINE_CHECK((g.M + kBM - 1) / kBM <= 65535, "gemm_mma: M = ", g.M, " needs more than 65535 row tiles");
  ENGINE_CHECK(gemm_mma_takes(st, g, A, B), "gemm_mma: lda ", g.lda, ", ldb ", g.ldb,
               " (and batch strides) must be multiples of 8 elements and A, B 16-byte aligned (cp.async copies "
               "16-byte chunks)");
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  if (epi == Epilogue::none) bias = nullptr;
  dispatch_storage(st, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, float>) {
      const bool ta = g.ta == Trans::T, tb = g.tb == Trans::T;
      if (g.out_f32) return launch<T, float, true, false>(g, A, B, C, bias, epi, aux, stream);
      if (!ta && !tb) launch<T, T, false, false>(g, A, B, C, bias, epi, aux, stream);
      if (!ta && tb) launch<T, T, false, true>(g, A, B, C, bias, epi, aux, stream);
      if (ta && !tb) launch<T, T, true, false>(g, A, B, C, bias, epi, aux, stream);
      if (ta && tb) launch<T, T, true, true>(g, A, B, C, bias, epi, aux, stream);
    }
  });
}

}  // namespace eng::ENGINE_GPU_NS
