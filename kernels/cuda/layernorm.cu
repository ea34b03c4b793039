// LayerNorm over the last dim, forward, and the residual add fused with it
// (llm.c's layernorm_forward / fused_residual_forward); and RMSNorm
// (Llama's), the same kernels with kRms: no mean subtracted (m = 0 below),
// no bias. The backward: layernorm_backward.cu.
// Reference: kernels/cpu/layernorm.cpp; walk-through from the naive kernel:
// docs/kernels/layernorm.md.
//   out  = (x - mean) * rstd * w + b,   rstd = 1 / sqrt(var + eps)
// RMSNorm: the same with mean = 0, rstd = 1 / sqrt(mean(x^2) + eps).
// Conventions: x, out, w, b in the storage type T; mean and rstd fp32, one
// per row; statistics always in fp32 (two passes, never a 16-bit
// accumulator).
#include <climits>

#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/rowwise.cuh"

namespace eng::ENGINE_GPU_NS {
using rowwise::load_raw;
using rowwise::load_vec;
using rowwise::RawVec;
using rowwise::store_vec;
using rowwise::warp_sum;

namespace {
constexpr int kWarpsPerBlock = 8;  // forward: 8 rows per block, one per warp
}  // namespace

// layernorm_forward_kernel: one warp per row, grid-stride over rows; for
// rows of single elements (V = 1) and rows over 8 packs a lane (the staged
// kernel below takes the rest).
// Launch: 256 threads (8 warps), grid = grid_for(N, 8). V = 1 or a 16-byte
// pack (see rowwise.cuh). Three sweeps over the row, all by the same lanes:
// sum -> mean, sum of squared deviations -> rstd, then the output; the second
// and third sweeps re-read x from L1/L2, not DRAM, for rows up to ~ 10K wide.
// Preconditions: C >= 1; V > 1 only if every row is 16-byte aligned.
// bytes = N C (2 sizeof(T)) + 2 C sizeof(T) + 8 N;  flops = ~8 N C.
// kRms: no mean sweep (m = 0), no bias, no mean written; bytes less 2 C
// sizeof(T) + 4 N, flops ~4 N C.
template <typename T, int V, bool kRms>
__global__ void layernorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                         T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         int64_t N, int C, float eps) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < N; row += warps) {
    const T* xr = x + row * C;
    float v[V], wv[V], bv[V] = {};
    float s = 0.f;
    if constexpr (!kRms)
      for (int i = lane * V; i < C; i += 32 * V) {
        load_vec<V>(xr + i, v);
        for (int k = 0; k < V; ++k) s += v[k];
      }
    const float m = kRms ? 0.f : warp_sum(s) / float(C);
    float q = 0.f;
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(xr + i, v);
      for (int k = 0; k < V; ++k) q += (v[k] - m) * (v[k] - m);
    }
    const float rs = rsqrtf(warp_sum(q) / float(C) + eps);
    T* orow = out + row * C;
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(xr + i, v);
      load_vec<V>(w + i, wv);
      if constexpr (!kRms) load_vec<V>(b + i, bv);
      for (int k = 0; k < V; ++k) v[k] = (v[k] - m) * rs * wv[k] + bv[k];
      store_vec<V>(orow + i, v);
    }
    if (lane == 0) {
      if constexpr (!kRms) mean[row] = m;
      rstd[row] = rs;
    }
  }
}

// layernorm_forward_staged_kernel (rows up to 32 V kIters wide, V a 16-byte
// pack): layernorm_forward_kernel's arithmetic in its order (not quite its
// bits: the emulator's compiler contracts products into FMAs by the code's
// shape, and differs), the row's packs loaded at once into registers, as stored, at indices
// clamped into the row (a lane past C loads the row's last pack again and
// leaves it unused), and the warp's next row loaded before this one is
// reduced and written. The sweep kernel's loops wait on their loads a
// pack or two at a time: at GPT-2's C = 768 (SASS, sm_90, bf16) a row is
// two trips to DRAM (the first pack, then the other two), three to L1 for
// the squares, then the output's; at the Llama's C = 2048 more (its RMSNorm
// reached 19% of the H200's HBM). Here a row is one trip, overlapped with
// the previous row's sums and stores.
// Launch: as layernorm_forward_kernel. Preconditions: every row 16-byte
// aligned, C % V == 0, C <= 32 V kIters. bytes, flops: as the sweep kernel's.
// The launch bounds' one block an SM leaves ptxas its registers: without
// it (CUDA 13) it held some instances to 48 and spilled (f16 at three packs
// on sm_90, f32 RMSNorm at eight on sm_80); with it 48-144, no spill.
template <typename T, int V, int kIters, bool kRms>
__global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    layernorm_forward_staged_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                    T* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int64_t N,
                                    int C, float eps) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  auto load_row = [&](int64_t row, RawVec<V, T>(&p)[kIters]) {
#pragma unroll
    for (int j = 0; j < kIters; ++j) p[j] = load_raw<V>(x + row * C + min((lane + 32 * j) * V, C - V));
  };
  int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  RawVec<V, T> cur[kIters] = {};
  if (row < N) load_row(row, cur);
  for (; row < N; row += warps) {
    RawVec<V, T> next[kIters] = {};
    if (row + warps < N) load_row(row + warps, next);  // in flight while this row is reduced and written
    float s = 0.f;
    if constexpr (!kRms)
#pragma unroll
      for (int j = 0; j < kIters; ++j)
        if ((lane + 32 * j) * V < C)
          for (int k = 0; k < V; ++k) s += to_f32(cur[j].v[k]);
    const float m = kRms ? 0.f : warp_sum(s) / float(C);
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < kIters; ++j)
      if ((lane + 32 * j) * V < C)
        for (int k = 0; k < V; ++k) q += (to_f32(cur[j].v[k]) - m) * (to_f32(cur[j].v[k]) - m);
    const float rs = rsqrtf(warp_sum(q) / float(C) + eps);
    T* orow = out + row * C;
#pragma unroll
    for (int j = 0; j < kIters; ++j) {
      const int i = (lane + 32 * j) * V;
      if (i < C) {
        float v[V], wv[V], bv[V] = {};
        load_vec<V>(w + i, wv);
        if constexpr (!kRms) load_vec<V>(b + i, bv);
        for (int k = 0; k < V; ++k) v[k] = (to_f32(cur[j].v[k]) - m) * rs * wv[k] + bv[k];
        store_vec<V>(orow + i, v);
      }
    }
    if (lane == 0) {
      if constexpr (!kRms) mean[row] = m;
      rstd[row] = rs;
    }
#pragma unroll
    for (int j = 0; j < kIters; ++j) cur[j] = next[j];
  }
}

// fused_residual_layernorm_forward_kernel: residual = x + r (rounded to T),
// out = layernorm(residual), in one launch: the sum is never re-read from
// DRAM by a separate layernorm launch. The statistics use the rounded sum,
// so out is exactly layernorm(residual) as stored.
// Launch, preconditions: as layernorm_forward_kernel (V > 1 only if x, r,
// residual and out rows are all 16-byte aligned).
// bytes = N C (4 sizeof(T)) + 2 C sizeof(T) + 8 N;  flops = ~9 N C.
// kRms: as layernorm_forward_kernel's.
template <typename T, int V, bool kRms>
__global__ void fused_residual_layernorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ r,
                                                        const T* __restrict__ w, const T* __restrict__ b,
                                                        T* __restrict__ residual, T* __restrict__ out,
                                                        float* __restrict__ mean, float* __restrict__ rstd, int64_t N,
                                                        int C, float eps) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < N; row += warps) {
    const int64_t off = row * C;
    float v[V], rv[V], wv[V], bv[V] = {};
    float s = 0.f;
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(x + off + i, v);
      load_vec<V>(r + off + i, rv);
      for (int k = 0; k < V; ++k) v[k] = to_f32(from_f32<T>(v[k] + rv[k]));  // the value residual holds
      store_vec<V>(residual + off + i, v);
      if constexpr (!kRms)
        for (int k = 0; k < V; ++k) s += v[k];
    }
    const float m = kRms ? 0.f : warp_sum(s) / float(C);
    float q = 0.f;
    // The same lane wrote these elements above, so it reads its own stores.
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(residual + off + i, v);
      for (int k = 0; k < V; ++k) q += (v[k] - m) * (v[k] - m);
    }
    const float rs = rsqrtf(warp_sum(q) / float(C) + eps);
    for (int i = lane * V; i < C; i += 32 * V) {
      load_vec<V>(residual + off + i, v);
      load_vec<V>(w + i, wv);
      if constexpr (!kRms) load_vec<V>(b + i, bv);
      for (int k = 0; k < V; ++k) v[k] = (v[k] - m) * rs * wv[k] + bv[k];
      store_vec<V>(out + off + i, v);
    }
    if (lane == 0) {
      if constexpr (!kRms) mean[row] = m;
      rstd[row] = rs;
    }
  }
}

namespace {
// The launchers' bodies, shared by LayerNorm (kRms false) and RMSNorm: which
// kernel instance, the vector width, the grid.
template <bool kRms>
void norm_forward(const char* fn, gpu::Storage st, const void* x, const void* w, const void* b, void* out, float* mean,
                  float* rstd, int64_t N, int64_t C, double eps, void* stream) {
  if (N == 0 || C == 0) return;
  ENGINE_CHECK(C <= INT_MAX, fn, ": rows of ", C, " elements are too wide");
  dispatch_storage(st, [&]<typename T>() {
    const T* px = static_cast<const T*>(x);
    const T* pw = static_cast<const T*>(w);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    const unsigned grid = grid_for(N, kWarpsPerBlock);
    constexpr int P = Pack128<T>::size;
    const bool vec = rowwise::rows_vectorizable<T>(C, x, out) && aligned16(w, b);
    const int64_t iters = (C + 32 * P - 1) / (32 * P);  // a lane's packs of a row
    // Staged, as many blocks as the GPU holds at once, each warp looping over
    // its rows (every next row's load in flight during the one before): at
    // GPT-2's B 64 three blocks an SM, about 21 rows a warp, where 1024
    // blocks of 8 rows ran in 2.6 waves, the last part empty.
    auto staged = [&]<int kIters>() {
      const unsigned blocks = resident_grid<layernorm_forward_staged_kernel<T, P, kIters, kRms>>(
          32 * kWarpsPerBlock, 0, (N + kWarpsPerBlock - 1) / kWarpsPerBlock);
      LAUNCH_KERNEL((layernorm_forward_staged_kernel<T, P, kIters, kRms>), blocks, 32 * kWarpsPerBlock, 0,
                    as_stream(stream), px, pw, pb, po, mean, rstd, N, int(C), float(eps));
    };
    if (vec && iters <= 3)  // GPT-2's C = 768 in 16-bit packs
      staged.template operator()<3>();
    else if (vec && iters <= 4)
      staged.template operator()<4>();
    else if (vec && iters <= 8)  // the Llama's C = 2048 in 16-bit packs
      staged.template operator()<8>();
    else if (vec)
      LAUNCH_KERNEL((layernorm_forward_kernel<T, P, kRms>), grid, 32 * kWarpsPerBlock, 0, as_stream(stream), px, pw, pb,
                    po, mean, rstd, N, int(C), float(eps));
    else
      LAUNCH_KERNEL((layernorm_forward_kernel<T, 1, kRms>), grid, 32 * kWarpsPerBlock, 0, as_stream(stream), px, pw, pb,
                    po, mean, rstd, N, int(C), float(eps));
  });
}

template <bool kRms>
void norm_residual_forward(const char* fn, gpu::Storage st, const void* x, const void* r, const void* w, const void* b,
                           void* residual, void* out, float* mean, float* rstd, int64_t N, int64_t C, double eps,
                           void* stream) {
  if (N == 0 || C == 0) return;
  ENGINE_CHECK(C <= INT_MAX, fn, ": rows of ", C, " elements are too wide");
  dispatch_storage(st, [&]<typename T>() {
    const T* px = static_cast<const T*>(x);
    const T* pr = static_cast<const T*>(r);
    const T* pw = static_cast<const T*>(w);
    const T* pb = static_cast<const T*>(b);
    T* pres = static_cast<T*>(residual);
    T* po = static_cast<T*>(out);
    const unsigned grid = grid_for(N, kWarpsPerBlock);
    constexpr int P = Pack128<T>::size;
    if (rowwise::rows_vectorizable<T>(C, x, r, residual) && aligned16(out, w, b))
      LAUNCH_KERNEL((fused_residual_layernorm_forward_kernel<T, P, kRms>), grid, 32 * kWarpsPerBlock, 0,
                    as_stream(stream), px, pr, pw, pb, pres, po, mean, rstd, N, int(C), float(eps));
    else
      LAUNCH_KERNEL((fused_residual_layernorm_forward_kernel<T, 1, kRms>), grid, 32 * kWarpsPerBlock, 0,
                    as_stream(stream), px, pr, pw, pb, pres, po, mean, rstd, N, int(C), float(eps));
  });
}

}  // namespace

void layernorm_forward(gpu::Storage st, const void* x, const void* w, const void* b, void* out, float* mean,
                       float* rstd, int64_t N, int64_t C, double eps, void* stream) {
  norm_forward<false>("layernorm_forward", st, x, w, b, out, mean, rstd, N, C, eps, stream);
}

void fused_residual_layernorm_forward(gpu::Storage st, const void* x, const void* r, const void* w, const void* b,
                                      void* residual, void* out, float* mean, float* rstd, int64_t N, int64_t C,
                                      double eps, void* stream) {
  norm_residual_forward<false>("fused_residual_layernorm_forward", st, x, r, w, b, residual, out, mean, rstd, N, C, eps,
                               stream);
}

void rmsnorm_forward(gpu::Storage st, const void* x, const void* w, void* out, float* rstd, int64_t N, int64_t C,
                     double eps, void* stream) {
  norm_forward<true>("rmsnorm_forward", st, x, w, nullptr, out, nullptr, rstd, N, C, eps, stream);
}

void fused_residual_rmsnorm_forward(gpu::Storage st, const void* x, const void* r, const void* w, void* residual,
                                    void* out, float* rstd, int64_t N, int64_t C, double eps, void* stream) {
  norm_residual_forward<true>("fused_residual_rmsnorm_forward", st, x, r, w, nullptr, residual, out, nullptr, rstd, N,
                              C, eps, stream);
}

}  // namespace eng::ENGINE_GPU_NS
