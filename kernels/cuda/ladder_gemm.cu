// The GEMM ladder's first two rungs (docs/kernels/gemm.md, steps 0 and 1);
// step 2, register blocking, is the shipped kernels/cuda/gemm.cu. f32,
// C = op(A) op(B) with GemmCall's row-major layout (batch 1, alpha 1, beta
// 0). Reference: kernels/gemm/blas_gemm.cpp (OpenBLAS).
#include "kernels/cuda/ladder.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kTile = 16;  // step 1's tile: 16 x 16 outputs, 256 threads

// op(A)[m, k] and op(B)[k, n] of a row-major operand that may be stored transposed.
__device__ __forceinline__ float at_a(const GemmCall& g, const float* A, int64_t m, int64_t k) {
  return g.ta == Trans::N ? A[m * g.lda + k] : A[k * g.lda + m];
}
__device__ __forceinline__ float at_b(const GemmCall& g, const float* B, int64_t k, int64_t n) {
  return g.tb == Trans::N ? B[k * g.ldb + n] : B[n * g.ldb + k];
}

// Step 0: one thread per output; every FMA loads two floats from global
// memory. bytes requested = 2 M N K 4 + M N 4 (caches absorb part of it);
// flops = 2 M N K.
__global__ void gemm_naive_kernel(GemmCall g, const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, m = int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
  if (m >= g.M || n >= g.N) return;
  float acc = 0.f;
  for (int64_t k = 0; k < g.K; ++k) acc += at_a(g, A, m, k) * at_b(g, B, k, n);
  C[m * g.ldc + n] = acc;
}

// Step 1: a block computes a 16 x 16 tile of C. For each 16-wide step along
// K its 256 threads copy a 16 x 16 block of op(A) and of op(B) into shared
// memory (one element each), wait, and run the inner loop out of shared
// memory. Global traffic: A read N/16 times, B M/16 times: bytes = 4 (M K
// ceil(N/16) + K N ceil(M/16)) + 4 M N; flops = 2 M N K.
__global__ void gemm_smem_kernel(GemmCall g, const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int64_t m = int64_t(blockIdx.y) * kTile + ty, n = int64_t(blockIdx.x) * kTile + tx;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < g.K; k0 += kTile) {
    // Out-of-range elements load as 0, so the ragged edges need no other branch.
    as[ty][tx] = (m < g.M && k0 + tx < g.K) ? at_a(g, A, m, k0 + tx) : 0.f;
    bs[ty][tx] = (k0 + ty < g.K && n < g.N) ? at_b(g, B, k0 + ty, n) : 0.f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += as[ty][k] * bs[k][tx];
    __syncthreads();  // before the next step overwrites the tiles
  }
  if (m < g.M && n < g.N) C[m * g.ldc + n] = acc;
}

void check_call(const GemmCall& g, const char* who) {
  ENGINE_CHECK(g.batch == 1 && g.alpha == 1.f && g.beta == 0.f, who,
               ": the ladder's GEMMs take batch 1, alpha 1, beta 0 (the engine's is tiled_gemm)");
}
}  // namespace

void ladder_gemm_naive(const GemmCall& g, const float* A, const float* B, float* C, void* stream) {
  check_call(g, "ladder_gemm_naive");
  if (g.M == 0 || g.N == 0) return;
  const dim3 block(kTile, kTile), grid(ceil_div(g.N, kTile), ceil_div(g.M, kTile));
  LAUNCH_KERNEL(gemm_naive_kernel, grid, block, 0, as_stream(stream), g, A, B, C);
}

void ladder_gemm_smem(const GemmCall& g, const float* A, const float* B, float* C, void* stream) {
  check_call(g, "ladder_gemm_smem");
  if (g.M == 0 || g.N == 0) return;
  const dim3 block(kTile, kTile), grid(ceil_div(g.N, kTile), ceil_div(g.M, kTile));
  LAUNCH_KERNEL(gemm_smem_kernel, grid, block, 0, as_stream(stream), g, A, B, C);
}

}  // namespace eng::ENGINE_GPU_NS
