// What the tensor-core attention kernels share (attention_mma.cu, the
// forward; attention_mma_backward.cu): tile sizes, the launch's dimensions,
// the cp.async tile loader, the fragment helpers and the shared-memory opt-in.
#pragma once
#include <cmath>

#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/exp2.cuh"
#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace eng::ENGINE_GPU_NS::attn_mma {

// Four warps of 16 rows a block; tiles of 64 rows (keys in the forward) with
// rows padded by 8 elements, so the eight 16-byte rows of an ldmatrix fall in
// different banks.
constexpr int kWarps = 4, kThreads = 32 * kWarps, kBr = 16 * kWarps, kBc = 64, kPad = 8;

struct MmaDims {
  int Tq, Tk, q_off, NH, BH;
  float scale;
  int64_t ld;   // rows of q (and dq): NH HS, or (NH + 2 NKV) HS (packed qkv)
  int64_t ldk;  // rows of k, v (and dk, dv): NKV HS, or ld (packed qkv)
  int group;    // query heads per K/V head (grouped-query attention; 1 without)
  int BKV;      // B NKV
};
// The launch's dimensions from attention_forward's contract (the launchers
// have checked HS and the grid).
inline MmaDims mma_dims(const gpu::AttentionDims& d) {
  const int64_t NKV = d.NKV ? d.NKV : d.NH;
  return MmaDims{int(d.Tq),
                 int(d.Tk),
                 int(d.q_offset),
                 int(d.NH),
                 int(d.B * d.NH),
                 1.f / std::sqrt(float(d.HS)),
                 d.ld_qkv ? d.ld_qkv : d.NH * d.HS,
                 d.ld_qkv ? d.ld_qkv : NKV * d.HS,
                 int(d.NH / NKV),
                 int(d.B * NKV)};
}

// Rows [row0, row0 + rows) of a head's (T, ld) matrix into a [rows][kHS + kPad]
// tile; rows at or past T zero-filled. 16 bytes a copy; commit is the caller's.
template <typename T, int kHS>
__device__ __forceinline__ void load_rows(T* tile, const T* head, int64_t ld, int row0, int rows, int Tn) {
  constexpr int kChunks = kHS / 8;
#pragma unroll 1  // unrolled, ptxas hoists every copy's address at once and spills (sm_80, head size 64)
  for (int c = int(threadIdx.x); c < rows * kChunks; c += kThreads) {
    const int r = c / kChunks, d = (c % kChunks) * 8;
    const bool in = row0 + r < Tn;
    const T* src = in ? head + int64_t(row0 + r) * ld + d : head;
    tc::cp_async_cg(tc::smem_addr(tile + r * (kHS + kPad) + d), src, in ? 16 : 0);
  }
}

// The A fragment of rows [row0, row0 + 16), columns [k0, k0 + 16) of a
// row-major tile (ld elements a row): ldmatrix.x4's four 8 x 8 matrices are
// (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
template <typename T>
__device__ __forceinline__ void a_frag(uint32_t (&a)[4], const T* tile, int ld, int row0, int k0) {
  const int lane = int(threadIdx.x % 32), j = lane / 8, r = lane % 8;
  tc::ldmatrix_x4(a, tc::smem_addr(tile + (row0 + r + 8 * (j & 1)) * ld + k0 + 8 * (j >> 1)));
}
// B fragments of two n8 tiles, n in [n0, n0 + 16), k in [k0, k0 + 16), from a
// tile stored [n][k] (k contiguous): b0 = n0..n0+7, b1 = n0+8..n0+15.
template <typename T>
__device__ __forceinline__ void b_frags_nk(uint32_t (&b0)[2], uint32_t (&b1)[2], const T* tile, int ld, int n0,
                                           int k0) {
  const int lane = int(threadIdx.x % 32), j = lane / 8, r = lane % 8;
  uint32_t q[4];  // (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
  tc::ldmatrix_x4(q, tc::smem_addr(tile + (n0 + r + 8 * (j >> 1)) * ld + k0 + 8 * (j & 1)));
  b0[0] = q[0], b0[1] = q[1], b1[0] = q[2], b1[1] = q[3];
}
// The same from a tile stored [k][n] (n contiguous), transposed by ldmatrix.
template <typename T>
__device__ __forceinline__ void b_frags_kn(uint32_t (&b0)[2], uint32_t (&b1)[2], const T* tile, int ld, int n0,
                                           int k0) {
  const int lane = int(threadIdx.x % 32), j = lane / 8, r = lane % 8;
  uint32_t q[4];  // (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
  tc::ldmatrix_x4_trans(q, tc::smem_addr(tile + (k0 + r + 8 * (j & 1)) * ld + n0 + 8 * (j >> 1)));
  b0[0] = q[0], b0[1] = q[1], b1[0] = q[2], b1[1] = q[3];
}
// Accumulator tiles 2c and 2c + 1 (16 x 8 each, fp32) as the A fragment of
// an m16n8k16 product over their 16 columns, rounded to T.
template <typename T>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = tc::pack2<T>(lo[0], lo[1]), a[1] = tc::pack2<T>(lo[2], lo[3]);
  a[2] = tc::pack2<T>(hi[0], hi[1]), a[3] = tc::pack2<T>(hi[2], hi[3]);
}

}  // namespace eng::ENGINE_GPU_NS::attn_mma
