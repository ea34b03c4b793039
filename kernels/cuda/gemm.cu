// The hand-written GEMM (shared-memory tiles + register blocking, with bias
// and GELU epilogues) and the bias gradient. Reference: kernels/gemm/blas_gemm.cpp
// (OpenBLAS) and kernels/cpu/elementwise.cpp (bias_backward). This is the
// GEMM the emu device runs and the teaching baseline cuBLASLt is measured
// against; docs/kernels/gemm.md walks from the naive kernel to this one.
// Conventions: row-major, GemmCall's meaning (kernels/gemm/gemm.h), storage
// f32/bf16/f16 converted to fp32 on load, fp32 accumulation, one rounding to
// the storage type on store.
#include "kernels/cuda/gemm.h"

#include <type_traits>

#include "kernels/cuda/gemm_epilogue.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
// Tile shape. A block computes a kBM x kBN tile of C, walking K in steps of
// kBK; each of its 64 threads owns a kTM x kTN micro-tile in registers.
//  - 8x8 micro-tiles: every k step a thread reads kTM + kTN = 16 floats from
//    shared memory for kTM * kTN = 64 FMAs (4 FMAs per shared load; 4x4 gives
//    2), with 64 accumulators + 16 operands: 125-168 registers in all on
//    sm_80 and sm_90, no spills (scripts/check_spills.sh keeps it so).
//  - 64x64 block tile: each element loaded from global memory is reused 64
//    times; shared memory is 2 * 16 * 68 * 4 B = 8.5 KiB, so several blocks
//    fit per SM; 64-row tiles waste less on the small, ragged shapes the tests
//    and the emulator can afford than the 128x128 tiles of tuned SGEMMs.
//  - 64 threads: the emulator's cost is per thread per barrier, and a GPU
//    hides latency with several such blocks per SM.
//  - kBK = 16: 1024 elements of each operand per stage, 16 per thread.
constexpr int kBM = 64, kBN = 64, kBK = 16, kTM = 8, kTN = 8;
constexpr int kThreadsX = kBN / kTN, kThreadsY = kBM / kTM, kThreads = kThreadsX * kThreadsY;
// Rows of the shared tiles are padded by 4 floats: the transposed stores
// (consecutive threads writing consecutive k, i.e. one row apart) would
// otherwise hit the same bank 16 ways; 4 keeps rows 16-byte aligned.
constexpr int kPad = 4;
static_assert(kThreads <= 256, "the emulator (and this file's launch) assume small blocks");
static_assert(kBM * kBK % kThreads == 0 && kBN * kBK % kThreads == 0);

// The bias gradient's block: 32 columns x 8 row groups.
constexpr int kBiasCols = 32, kBiasRowGroups = 8;
}  // namespace

// Copies the kR x kC tile at p (row-major, row stride ld: a block of the
// operand as stored) into a k-major shared tile, transposing it when the
// stored rows are m or n rather than k. Consecutive threads take consecutive
// columns, so each warp's global loads coalesce. Elements past rows_left /
// cols_left (the ragged edges of M, N, K) load as 0.
enum class Into : uint8_t { as_is, transposed };
template <int kR, int kC, Into kInto, typename T, int kLd>
__device__ __forceinline__ void stage_tile(const T* __restrict__ p, int64_t ld, int rows_left, int cols_left,
                                           float (*smem)[kLd]) {
  constexpr int kRowsPerPass = kThreads / kC;
  static_assert(kThreads % kC == 0 && kR % kRowsPerPass == 0);
  const int col = int(threadIdx.x) % kC, r0 = int(threadIdx.x) / kC;
  p += r0 * ld + col;
  const int64_t step = kRowsPerPass * ld;
  // Not unrolled on purpose: unrolled, ptxas hoists all 16 loads' addresses
  // and predicates of both operands at once and hits 255 registers with
  // spills (measured with -Xptxas -v on sm_80); rolled, the kernel needs
  // 125-168 registers and spills nothing.
#pragma unroll 1
  for (int i = 0; i < kR / kRowsPerPass; ++i) {
    const int r = r0 + i * kRowsPerPass;
    const float v = r < rows_left && col < cols_left ? to_f32(p[i * step]) : 0.f;
    if constexpr (kInto == Into::transposed)
      smem[col][r] = v;
    else
      smem[r][col] = v;
  }
}

// C_z = alpha op(A_z) op(B_z) + beta C_z (+ bias) for every batch index z;
// with a GELU epilogue, C_z = gelu(that), and aux_z (laid out as C) = that.
// Launch: grid (ceil(N / 64), ceil(M / 64), min(batch, 65535)), block 64;
// blocks loop over z in steps of gridDim.z. Thread (tx, ty) = (t % 8, t / 8)
// owns rows ty + 8i and columns tx + 8j (i, j < 8) of the block's tile, so a
// warp's stores of one row are 8 consecutive columns and its shared-memory
// reads are broadcasts (A) or consecutive words (B).
// Preconditions: M, N >= 1 (K may be 0: C = beta C + bias); beta == 0 never
// reads C; C does not alias A or B; ragged edges of M, N, K are bounds-checked
// (out-of-range operands load as 0); bias is nullptr for Epilogue::none,
// dgelu and residual and set otherwise; aux is set for gelu_aux_bias
// (written), bias_residual, residual and dgelu (read) and aliases nothing.
// Epilogue::bgrad (a linear layer's dW = G^T X; cuBLASLt's BGRADB, our A
// its B): dbias is written (bias is nullptr), dbias[m] = sum over k of
// op(A)[m, k] (G's column sums), by the blocks of the first column tile as
// they stream A's tiles through shared memory, in k order (deterministic);
// only for TA == T and batch 1.
// TC, the type of C and dbias: T, or float for 16-bit A and B (out_f32: a
// weight gradient written in fp32, one rounding less).
// bytes (per batch, with tile reuse) = sizeof(T) * (M K ceil(N/64) + K N ceil(M/64)
//   + N (bias) + M N (aux)) + sizeof(TC) * (M N (beta != 0 ? 2 : 1) + M (dbias));
// flops = 2 M N K per batch (+ ~20 M N for GELU, ~30 M N for its gradient, + M K
// for the bias gradient).
template <typename T, typename TC, Trans TA, Trans TB>
__global__ void __launch_bounds__(kThreads)
    tiled_gemm_kernel(const T* __restrict__ A, const T* __restrict__ B, TC* __restrict__ C, const T* __restrict__ bias,
                      Epilogue epi, T* __restrict__ aux, TC* __restrict__ dbias, GemmCall c) {
  // bgrad: thread t of a first-column block sums row m0 + t of op(A).
  const bool bgrad = dbias != nullptr && blockIdx.x == 0;
  static_assert(kThreads == kBM, "bgrad: one thread per row of the block's tile");
  float row_sum = 0.f;
  __shared__ float smem_a[kBK][kBM + kPad];  // op(A) tile, k-major: smem_a[k][m]
  __shared__ float smem_b[kBK][kBN + kPad];  // op(B) tile: smem_b[k][n]
  const int t = int(threadIdx.x), tx = t % kThreadsX, ty = t / kThreadsX;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  for (int64_t z = blockIdx.z; z < c.batch; z += gridDim.z) {
    const T* a = A + z * c.stride_a;
    const T* b = B + z * c.stride_b;
    TC* cz = C + z * c.stride_c;
    T* auxz = aux != nullptr ? aux + z * c.stride_c : nullptr;
    float acc[kTM][kTN] = {};
    const int m_left = int(c.M - m0 < kBM ? c.M - m0 : kBM), n_left = int(c.N - n0 < kBN ? c.N - n0 : kBN);
    for (int64_t k0 = 0; k0 < c.K; k0 += kBK) {
      const int k_left = int(c.K - k0 < kBK ? c.K - k0 : kBK);
      if constexpr (TA == Trans::N)
        stage_tile<kBM, kBK, Into::transposed>(a + m0 * c.lda + k0, c.lda, m_left, k_left, smem_a);
      else
        stage_tile<kBK, kBM, Into::as_is>(a + k0 * c.lda + m0, c.lda, k_left, m_left, smem_a);
      if constexpr (TB == Trans::N)
        stage_tile<kBK, kBN, Into::as_is>(b + k0 * c.ldb + n0, c.ldb, k_left, n_left, smem_b);
      else
        stage_tile<kBN, kBK, Into::transposed>(b + n0 * c.ldb + k0, c.ldb, n_left, k_left, smem_b);
      __syncthreads();
      if (bgrad)  // elements past K load as 0
        for (int kk = 0; kk < kBK; ++kk) row_sum += smem_a[kk][t];
          // Register blocking: kTM + kTN shared loads feed kTM * kTN FMAs.
#pragma unroll
      for (int kk = 0; kk < kBK; ++kk) {
        float ra[kTM], rb[kTN];
#pragma unroll
        for (int i = 0; i < kTM; ++i) ra[i] = smem_a[kk][ty + i * kThreadsY];
#pragma unroll
        for (int j = 0; j < kTN; ++j) rb[j] = smem_b[kk][tx + j * kThreadsX];
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
      }
      __syncthreads();  // the next stage overwrites the tiles
    }
    // Epilogue: gemm_epilogue.cuh (alpha, beta, residual, bias, one rounding, GELU or its gradient).
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
      const int64_t m = m0 + ty + i * kThreadsY;
      if (m >= c.M) continue;
#pragma unroll
      for (int j = 0; j < kTN; ++j) {
        const int64_t n = n0 + tx + j * kThreadsX;
        if (n >= c.N) continue;
        store_with_epilogue<T, TC>(cz, m * c.ldc + n, acc[i][j], c, epi, bias, n, auxz);
      }
    }
    if (bgrad && m0 + t < c.M) dbias[m0 + t] = from_f32<TC>(row_sum);
  }
}

// db[c] = sum_r dout[r, c] for a contiguous (rows, cols) dout, fp32 sums.
// Launch: block (32, 8), grid grid_for(ceil(cols / 32), 1); blocks loop over
// bands of 32 columns in steps of gridDim.x. Thread (x, y) sums rows y, y + 8,
// ... of column x (a warp reads 32 consecutive columns of a row: coalesced);
// then thread (x, 0) adds the 8 partial sums in order y = 0..7. The order is
// fixed by the launch shape alone, so results are bitwise reproducible
// (no float atomics).
// Preconditions: none (rows = 0 writes zeros). bytes = sizeof(T) (rows cols + cols);
// flops = rows cols.
template <typename T>
__global__ void __launch_bounds__(kBiasCols* kBiasRowGroups)
    bias_backward_kernel(const T* __restrict__ dout, T* __restrict__ db, int64_t rows, int64_t cols) {
  __shared__ float smem_part[kBiasRowGroups][kBiasCols];
  const int x = int(threadIdx.x), y = int(threadIdx.y);
  for (int64_t c0 = int64_t(blockIdx.x) * kBiasCols; c0 < cols; c0 += int64_t(gridDim.x) * kBiasCols) {
    const int64_t col = c0 + x;
    float acc = 0.f;
    if (col < cols)
      for (int64_t r = y; r < rows; r += kBiasRowGroups) acc += to_f32(dout[r * cols + col]);
    smem_part[y][x] = acc;
    __syncthreads();
    if (y == 0 && col < cols) {
      float s = 0.f;
      for (int g = 0; g < kBiasRowGroups; ++g) s += smem_part[g][x];
      db[col] = from_f32<T>(s);
    }
    __syncthreads();  // the next band overwrites smem_part
  }
}

namespace {
template <typename T, typename TC, Trans TA, Trans TB>
void launch_gemm(const GemmCall& c, const void* A, const void* B, void* C, const void* bias, Epilogue epi, void* aux,
                 void* stream) {
  const dim3 grid(ceil_div(c.N, kBN), ceil_div(c.M, kBM), unsigned(c.batch < 65535 ? c.batch : 65535));
  // bgrad writes the launcher's bias pointer (cuBLASLt's convention): the kernel's dbias.
  const bool bgrad = epi == Epilogue::bgrad;
  LAUNCH_KERNEL(tiled_gemm_kernel<T, TC, TA, TB>, grid, kThreads, 0, as_stream(stream), static_cast<const T*>(A),
                static_cast<const T*>(B), static_cast<TC*>(C), bgrad ? nullptr : static_cast<const T*>(bias), epi,
                static_cast<T*>(aux), bgrad ? static_cast<TC*>(const_cast<void*>(bias)) : nullptr, c);
}
}  // namespace

void tiled_gemm(gpu::Storage st, const GemmCall& c, const void* A, const void* B, void* C, const void* bias,
                Epilogue epi, void* aux, void* stream) {
  check_gemm_args("tiled_gemm", st, c, bias, epi, aux);
  if (c.M == 0 || c.N == 0 || c.batch == 0) return;
  if (epi == Epilogue::none) bias = nullptr;
  ENGINE_CHECK((c.M + kBM - 1) / kBM <= 65535, "tiled_gemm: M = ", c.M, " needs more than 65535 row tiles");
  dispatch_storage(st, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, float>) {
      if (c.out_f32) return launch_gemm<T, float, Trans::T, Trans::N>(c, A, B, C, bias, epi, aux, stream);
    }
    if (c.ta == Trans::N && c.tb == Trans::N)
      launch_gemm<T, T, Trans::N, Trans::N>(c, A, B, C, bias, epi, aux, stream);
    else if (c.ta == Trans::N)
      launch_gemm<T, T, Trans::N, Trans::T>(c, A, B, C, bias, epi, aux, stream);
    else if (c.tb == Trans::N)
      launch_gemm<T, T, Trans::T, Trans::N>(c, A, B, C, bias, epi, aux, stream);
    else
      launch_gemm<T, T, Trans::T, Trans::T>(c, A, B, C, bias, epi, aux, stream);
  });
}

void bias_backward(gpu::Storage st, const void* dout, void* db, int64_t rows, int64_t cols, void* stream) {
  if (cols == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    const dim3 block(kBiasCols, kBiasRowGroups);
    LAUNCH_KERNEL(bias_backward_kernel<T>, grid_for(ceil_div(cols, kBiasCols), 1), block, 0, as_stream(stream),
                  static_cast<const T*>(dout), static_cast<T*>(db), rows, cols);
  });
}

}  // namespace eng::ENGINE_GPU_NS
