// LayerNorm's and RMSNorm's backward (the forward: layernorm.cu): dx, with
// the residual stream's pending gradient added in, dweight and dbias
// (llm.c's layernorm_backward), and dx's column sums when asked for (a linear
// layer's bias gradient). RMSNorm (kRms): no mean subtracted (m = 0 below), no
// db, dx without its mean(g) term.
// Reference: kernels/cpu/layernorm.cpp; walk-through from the naive kernel:
// docs/kernels/layernorm.md.
//   dx   = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w,
//          xhat = (x - mean) * rstd
//   dw   = sum over rows of dout * xhat,   db = sum over rows of dout
// Conventions: dout, x, dx, w in the storage type T (dw, db in T or in fp32,
// written or added to, as gpu::ParamGrads asks); mean and rstd fp32, one per
// row; sums always in fp32. dx, dw and db are written (=), not accumulated.
// Determinism: dw/db never use float atomics. Each block sums its rows into
// its own row of an fp32 scratch buffer (its warps in warp order), and a
// second kernel adds those rows up in block order, so the result is the same
// bits on every run.
// Rows of three or four 16-byte packs a lane over a long grid (GPT-2's
// bf16 C = 768 at B 64) take the staged warp kernel, by default in its
// prefetching form (the next row copied into shared memory while this one
// is worked on; ENGINE_LAYERNORM_BACKWARD, layernorm.h): the same bits.
#include <climits>

#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/partial_sums.cuh"
#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace eng::ENGINE_GPU_NS {
using rowwise::load_raw;
using rowwise::load_vec;
using rowwise::RawVec;
using rowwise::store_vec;
using rowwise::warp_sum;

namespace {
constexpr int kBackwardWarps = 8;  // the warp backward: 8 warps a block, a row per warp at a time
// The staged warp backward at three packs a lane (GPT-2's C = 768 in 16-bit
// packs): 164 registers a thread (ptxas -v, sm_90, bf16; 168 with dx's
// column sums) leave room for 12 warps an SM (168 each at most), one block
// of 12, not 8: half as many
// bytes again in flight (measured on the H200: 1% faster, not the 20%
// predicted; the kernel is not short of warps).
constexpr int kStagedWarps = 12;
}  // namespace

// The prefetching kernel's shared memory: the block's sums (3 C floats, as
// many as the kernel may use, rounded up to a 16-byte multiple), then two
// row buffers a warp of three tensors' packs (dout, x, dresidual) each.
__host__ __device__ inline int64_t prefetch_sums_floats(int64_t C) { return (3 * C + 3) / 4 * 4; }
__host__ __device__ inline int64_t prefetch_smem_bytes(int64_t C, int warps, int iters) {
  return prefetch_sums_floats(C) * 4 + int64_t(warps) * 2 * 3 * iters * 32 * 16;
}

// The backward's two steps on one pack of a row (i: its first element; dv
// and xv: dout and x there, as loaded), shared by both backward kernels.
// backward_sums adds the pack's share of sum(g) and sum(g xhat), g = dout w
// rounded on its own (no FMA into the sums or the output below), so g -
// mean(g) is exactly 0 where the row has one element: an FMA keeps g's
// unrounded product, and rstd (1/sqrt(eps) there) scales the rounding error
// to ~1e-5 (seen on an H100).
template <int V, typename T>
__device__ __forceinline__ void backward_sums(const RawVec<V, T>& dv, const RawVec<V, T>& xv, const T* w, int i,
                                              float m, float rs, float& sg, float& sgx) {
  float wv[V];
  load_vec<V>(w + i, wv);
  for (int k = 0; k < V; ++k) {
    const float g = __fmul_rn(to_f32(dv.v[k]), wv[k]);
    sg += g;
    sgx += g * ((to_f32(xv.v[k]) - m) * rs);
  }
}
// backward_pack writes the pack of dx = rstd (g - mg - xhat mgx) + dresidual
// (rv: the residual's gradient there, if has_rv) and adds its dw, db terms
// into adw, adb, and dx as stored (rounded to T) into ads unless it is null
// (the column sums of dx: the bias gradient of the linear layer whose
// output x is, engine/ops/layernorm.cpp).
template <int V, bool kRms, typename T>
__device__ __forceinline__ void backward_pack(const RawVec<V, T>& dv, const RawVec<V, T>& xv, const T* w,
                                              const RawVec<V, T>& rv, bool has_rv, T* dxr, int i, float m, float rs,
                                              float mg, float mgx, float* adw, float* adb, float* ads) {
  float wv[V], o[V];
  load_vec<V>(w + i, wv);
  for (int k = 0; k < V; ++k) o[k] = has_rv ? to_f32(rv.v[k]) : 0.f;
  for (int k = 0; k < V; ++k) {
    const float d = to_f32(dv.v[k]), xhat = (to_f32(xv.v[k]) - m) * rs;
    o[k] += rs * (__fmul_rn(d, wv[k]) - mg - xhat * mgx);
    adw[k] += d * xhat;
    if constexpr (!kRms) adb[k] += d;
  }
  if (ads)
    for (int k = 0; k < V; ++k) ads[k] += to_f32(from_f32<T>(o[k]));
  store_vec<V>(dxr + i, o);
}

// One row of the staged kernels, its packs in registers (dv, xv and rv:
// dout, x and the residual's gradient at the lane's packs, as stored): the
// two sums, then dx and the lane's dw, db (and dx's column sums into ads
// unless kSumDx is false). Shared by the register-staged and the
// prefetching kernel, so both give the same bits.
template <int V, int kIters, bool kRms, bool kSumDx, typename T>
__device__ __forceinline__ void staged_row(const RawVec<V, T> (&dv)[kIters], const RawVec<V, T> (&xv)[kIters],
                                           const RawVec<V, T> (&rv)[kIters], bool has_rv, const T* w, T* dxr, int lane,
                                           int C, float m, float rs, float (&adw)[kIters][V], float (&adb)[kIters][V],
                                           float (&ads)[kSumDx ? kIters : 1][V]) {
  float sg = 0.f, sgx = 0.f;
#pragma unroll
  for (int j = 0; j < kIters; ++j)
    if ((lane + 32 * j) * V < C) backward_sums<V>(dv[j], xv[j], w, (lane + 32 * j) * V, m, rs, sg, sgx);
  const float mg = kRms ? 0.f : warp_sum(sg) / float(C), mgx = warp_sum(sgx) / float(C);
#pragma unroll
  for (int j = 0; j < kIters; ++j)
    if ((lane + 32 * j) * V < C)
      backward_pack<V, kRms>(dv[j], xv[j], w, rv[j], has_rv, dxr, (lane + 32 * j) * V, m, rs, mg, mgx, adw[j], adb[j],
                             kSumDx ? ads[kSumDx ? j : 0] : nullptr);
}

// The end of the warp kernels: the block's warps add their registers' dw,
// db (and dx's column sums) into shared memory (smem, 2 C floats, 3 C with
// kSumDx) one warp after the other (warp order: fixed bits), and the block
// writes its row of partial.
template <int V, int kIters, bool kRms, bool kSumDx>
__device__ __forceinline__ void block_partials(float* smem, const float (&adw)[kIters][V],
                                               const float (&adb)[kIters][V],
                                               const float (&ads)[kSumDx ? kIters : 1][V], float* partial, int C) {
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), nwarps = int(blockDim.x / 32);
  for (int wp = 0; wp < nwarps; ++wp) {  // one warp at a time, in order
    if (warp == wp)
      for (int j = 0; j < kIters; ++j) {
        const int i = (lane + 32 * j) * V;
        if (i < C)
          for (int k = 0; k < V; ++k) {
            smem[i + k] = wp == 0 ? adw[j][k] : smem[i + k] + adw[j][k];
            smem[C + i + k] = wp == 0 ? adb[j][k] : smem[C + i + k] + adb[j][k];
            if constexpr (kSumDx) smem[2 * C + i + k] = wp == 0 ? ads[j][k] : smem[2 * C + i + k] + ads[j][k];
          }
      }
    __syncthreads();
  }
  constexpr int kParts = kRms ? 1 : kSumDx ? 3 : 2;  // dw (and db, and dx's sums)
  float* const prow = partial + int64_t(blockIdx.x) * kParts * C;
  for (int i = int(threadIdx.x); i < kParts * C; i += int(blockDim.x)) prow[i] = smem[i];
}

// layernorm_backward_warp_kernel (rows up to 32 V kIters wide): one warp
// per row, grid-stride over rows; no block barrier inside the row loop.
// Lane l owns elements l V + j 32 V (+ 0..V-1), j < kIters, of every row its
// warp visits and sums their dw/db in registers, in row order. Per row: one
// sweep of dout and x for sum(g) and sum(g xhat) (warp shuffles), a second
// for dx = rstd (g - mean(g) - xhat mean(g xhat)) + dresidual. kStaged (up
// to 4 packs a lane) loads the row's dout, x and dresidual at once and keeps
// them in registers for both sweeps, else a pack at a time, the second sweep
// re-reading L1/L2: the launcher's choice (norm_backward).
// At the end the block's warps add their registers into shared memory one
// warp after the other (warp order: fixed bits), and the block writes its
// row of partial. kSumDx: a third sum in registers, dx's columns as stored
// (dx's column sums, a linear layer's bias gradient), and rows of partial 3 C
// wide. Launch: kWarps warps, grid <= kLayernormBackwardWarpBlocks,
// dynamic smem 2 C floats (3 C with kSumDx). Preconditions: C <= 32 V kIters;
// V > 1 only if all rows are 16-byte aligned and C % V == 0.
// bytes = N C (3 + [dresidual]) sizeof(T) + 8 N + C sizeof(T) + grid 2 C 4;  flops = ~15 N C.
// kSumDx: grid 3 C 4 for the partials, flops + N C.
// kRms: mean(g) = 0, no db: partial rows of C (grid C 4), 4 N for rstd alone.
template <typename T, int V, int kIters, bool kRms, bool kStaged, int kWarps, bool kSumDx = false>
__global__ void __launch_bounds__(32 * kWarps)
    layernorm_backward_warp_kernel(const T* __restrict__ dout, const T* __restrict__ x, const T* __restrict__ w,
                                   const float* __restrict__ mean, const float* __restrict__ rstd,
                                   const T* __restrict__ dresidual, T* __restrict__ dx, float* __restrict__ partial,
                                   int64_t N, int C) {
  static_assert(!(kRms && kSumDx), "dx's column sums are a bias gradient: LayerNorm's, not RMSNorm's");
  DYNAMIC_SMEM(float, smem);  // [0, C): dw, [C, 2C): db, [2C, 3C): dx (kSumDx), the block's sums
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32), nwarps = int(blockDim.x / 32);
  float adw[kIters][V], adb[kIters][V], ads[kSumDx ? kIters : 1][V];
  for (int j = 0; j < kIters; ++j)
    for (int k = 0; k < V; ++k) adw[j][k] = adb[j][k] = 0.f;
  for (int j = 0; j < (kSumDx ? kIters : 1); ++j)
    for (int k = 0; k < V; ++k) ads[j][k] = 0.f;
  for (int64_t row = int64_t(blockIdx.x) * nwarps + warp; row < N; row += int64_t(gridDim.x) * nwarps) {
    const T* dr = dout + row * C;
    const T* xr = x + row * C;
    const T* dres = dresidual ? dresidual + row * C : nullptr;
    const float m = kRms ? 0.f : mean[row], rs = rstd[row];
    if constexpr (kStaged) {
      // Every pack of the lane's share of the row is loaded before any is
      // used (dout, x and the residual's gradient, as stored, in registers),
      // at an index clamped into the row: a lane past C loads the row's last
      // pack again and leaves it unused. A row costs one trip to DRAM, not
      // one a pack: guarded loads compile to a branch and a round trip each,
      // about 12 KB in flight an SM where the H200 needs about 25.
      RawVec<V, T> dv[kIters], xv[kIters], rv[kIters];
#pragma unroll
      for (int j = 0; j < kIters; ++j) {
        const int i = min((lane + 32 * j) * V, C - V);
        dv[j] = load_raw<V>(dr + i);
        xv[j] = load_raw<V>(xr + i);
        rv[j] = dres ? load_raw<V>(dres + i) : RawVec<V, T>{};
      }
      staged_row<V, kIters, kRms, kSumDx>(dv, xv, rv, dres != nullptr, w, dx + row * C, lane, C, m, rs, adw, adb, ads);
    } else {
      float sg = 0.f, sgx = 0.f;
#pragma unroll
      for (int j = 0; j < kIters; ++j) {
        const int i = (lane + 32 * j) * V;
        if (i < C) backward_sums<V>(load_raw<V>(dr + i), load_raw<V>(xr + i), w, i, m, rs, sg, sgx);
      }
      const float mg = kRms ? 0.f : warp_sum(sg) / float(C), mgx = warp_sum(sgx) / float(C);
#pragma unroll
      for (int j = 0; j < kIters; ++j) {
        const int i = (lane + 32 * j) * V;
        if (i < C)
          backward_pack<V, kRms>(load_raw<V>(dr + i), load_raw<V>(xr + i), w,
                                 dres ? load_raw<V>(dres + i) : RawVec<V, T>{}, dres != nullptr, dx + row * C, i, m, rs,
                                 mg, mgx, adw[j], adb[j], kSumDx ? ads[kSumDx ? j : 0] : nullptr);
      }
    }
  }
  block_partials<V, kIters, kRms, kSumDx>(smem, adw, adb, ads, partial, C);
}

// layernorm_backward_prefetch_kernel (rows of up to 32 V kIters, V a
// 16-byte pack): the staged warp kernel's rows, warps and arithmetic
// (staged_row, block_partials: the same bits), but the row's packs come
// from shared memory, copied there by cp.async one row ahead: while a warp
// reduces and writes row r, row r + the grid's warps is on its way to its
// second buffer (and that row's mean and rstd to registers). The staged
// kernel has a row in flight a warp only while the warp waits for it, and
// more warps an SM did not raise its bandwidth (the fourth H200 run: 8 ->
// 12 warps, 1% faster): its warps wait, then compute, then wait again.
// Each lane copies the packs it reads itself (its lane's slots of dout, x
// and dresidual), so its own wait covers them: no warp or block barrier in
// the loop. It issues the copy over a buffer only after it has read that
// buffer's packs into registers (the row before: the emulator poisons a
// copy's destination at issue, so a read after would see NaN). One commit
// a row, empty past the warp's last, so wait_group 1 always leaves exactly
// the next row's copy pending.
// Launch: kWarps warps, grid <= kLayernormBackwardWarpBlocks, dynamic smem
// prefetch_smem_bytes (the block's sums, then each warp's two row buffers).
// Preconditions: as the staged kernel's. bytes, flops: as the warp kernel's.
template <typename T, int V, int kIters, bool kRms, int kWarps, bool kSumDx>
__global__ void __launch_bounds__(32 * kWarps)
    layernorm_backward_prefetch_kernel(const T* __restrict__ dout, const T* __restrict__ x, const T* __restrict__ w,
                                       const float* __restrict__ mean, const float* __restrict__ rstd,
                                       const T* __restrict__ dresidual, T* __restrict__ dx, float* __restrict__ partial,
                                       int64_t N, int C) {
  static_assert(!(kRms && kSumDx), "dx's column sums are a bias gradient: LayerNorm's, not RMSNorm's");
  DYNAMIC_SMEM(float, smem);  // the block's sums, as the warp kernel's; then the row buffers
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  constexpr int kSlot = 32 * V;  // one tensor's packs of a row in a buffer, lane by lane (no bank conflicts)
  // This warp's buffers: [2][3][kIters][32 V] elements (dout, x, dresidual).
  T* const bufs = reinterpret_cast<T*>(smem + prefetch_sums_floats(C)) + int64_t(warp) * 2 * 3 * kIters * kSlot;
  auto slot = [&](int buf, int tensor, int j) { return bufs + ((buf * 3 + tensor) * kIters + j) * kSlot + lane * V; };
  auto issue = [&](int64_t row, int buf) {
    if (row < N)
#pragma unroll
      for (int j = 0; j < kIters; ++j) {
        const int64_t i = row * C + min((lane + 32 * j) * V, C - V);  // clamped into the row, as the staged kernel's
        tc::cp_async_cg(tc::smem_addr(slot(buf, 0, j)), dout + i);
        tc::cp_async_cg(tc::smem_addr(slot(buf, 1, j)), x + i);
        if (dresidual) tc::cp_async_cg(tc::smem_addr(slot(buf, 2, j)), dresidual + i);
      }
    tc::cp_async_commit();
  };
  float adw[kIters][V], adb[kIters][V], ads[kSumDx ? kIters : 1][V];
  for (int j = 0; j < kIters; ++j)
    for (int k = 0; k < V; ++k) adw[j][k] = adb[j][k] = 0.f;
  for (int j = 0; j < (kSumDx ? kIters : 1); ++j)
    for (int k = 0; k < V; ++k) ads[j][k] = 0.f;
  const int64_t stride = int64_t(gridDim.x) * kWarps;
  int64_t row = int64_t(blockIdx.x) * kWarps + warp;
  issue(row, 0);
  float next_m = 0.f, next_rs = 0.f;
  if (row < N) {
    next_m = kRms ? 0.f : mean[row];
    next_rs = rstd[row];
  }
  for (int turn = 0; row < N; row += stride, ++turn) {
    const int cur = turn & 1;
    const float m = next_m, rs = next_rs;
    issue(row + stride, cur ^ 1);  // its buffer's packs were read into registers in the turn before
    if (row + stride < N) {
      next_m = kRms ? 0.f : mean[row + stride];
      next_rs = rstd[row + stride];
    }
    tc::cp_async_wait_group<1>();  // this lane's packs of this row have landed
    RawVec<V, T> dv[kIters], xv[kIters], rv[kIters];
#pragma unroll
    for (int j = 0; j < kIters; ++j) {
      dv[j] = load_raw<V>(slot(cur, 0, j));
      xv[j] = load_raw<V>(slot(cur, 1, j));
      rv[j] = dresidual ? load_raw<V>(slot(cur, 2, j)) : RawVec<V, T>{};
    }
    staged_row<V, kIters, kRms, kSumDx>(dv, xv, rv, dresidual != nullptr, w, dx + row * C, lane, C, m, rs, adw, adb,
                                        ads);
  }
  tc::cp_async_wait_all();  // no copy outlives the warp (the last group is empty)
  block_partials<V, kIters, kRms, kSumDx>(smem, adw, adb, ads, partial, C);
}

// layernorm_backward_kernel (any row up to kLayernormBackwardMaxC): one
// block per row, grid-stride over rows; writes dx (+ dresidual when given),
// and block b's dw/db partial sums to partial[b][0, C) and [C, 2C).
// Thread t owns elements t*V + k*blockDim*V (+ 0..V-1) of every row; it
// accumulates their dw/db in shared memory that no other thread touches, in
// row order, so the partial sums need neither atomics nor barriers.
// sum_dx: dx's column sums too, a third accumulator in shared memory and
// partial rows of 3 C (the warp kernel's kSumDx).
// Launch: blockDim a multiple of 32 (<= 256), grid <= kLayernormBackwardMaxBlocks,
// dynamic smem = (2 C + 64) floats, (3 C + 64) with sum_dx. Preconditions: C >= 1, C <=
// kLayernormBackwardMaxC (kLayernormBackwardMaxCSums with sum_dx); V > 1 only if all rows are 16-byte aligned.
// bytes = N C (3 + [dresidual]) sizeof(T) + 8 N + C sizeof(T) + grid 2 C 4;  flops = ~15 N C.
// kRms: as the warp kernel's.
template <typename T, int V, bool kRms>
__global__ void layernorm_backward_kernel(const T* __restrict__ dout, const T* __restrict__ x, const T* __restrict__ w,
                                          const float* __restrict__ mean, const float* __restrict__ rstd,
                                          const T* __restrict__ dresidual, T* __restrict__ dx,
                                          float* __restrict__ partial, int64_t N, int C, bool sum_dx) {
  DYNAMIC_SMEM(float, smem);
  float* const smem_dw = smem;
  float* const smem_db = smem + C;
  float* const smem_ds = sum_dx ? smem + 2 * C : nullptr;
  float* const smem_red = smem + (sum_dx ? 3 : 2) * C;  // [0, 32): sums of g, [32, 64): sums of g * xhat, one per warp
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32, nwarps = int(blockDim.x / 32);
  const int step = int(blockDim.x) * V;
  for (int i = tid * V; i < C; i += step)
    for (int k = 0; k < V; ++k) {
      smem_dw[i + k] = smem_db[i + k] = 0.f;
      if (sum_dx) smem_ds[i + k] = 0.f;
    }
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const T* dr = dout + row * C;
    const T* xr = x + row * C;
    const float m = kRms ? 0.f : mean[row], rs = rstd[row];
    float sg = 0.f, sgx = 0.f;
    for (int i = tid * V; i < C; i += step)
      backward_sums<V>(load_raw<V>(dr + i), load_raw<V>(xr + i), w, i, m, rs, sg, sgx);
    sg = warp_sum(sg);
    sgx = warp_sum(sgx);
    __syncthreads();  // the previous row's readers of smem_red are done
    if (lane == 0) {
      smem_red[warp] = sg;
      smem_red[32 + warp] = sgx;
    }
    __syncthreads();
    sg = 0.f;
    sgx = 0.f;
    for (int j = 0; j < nwarps; ++j) {  // every thread, same order: same bits
      sg += smem_red[j];
      sgx += smem_red[32 + j];
    }
    const float mg = kRms ? 0.f : sg / float(C), mgx = sgx / float(C);
    const T* dres = dresidual ? dresidual + row * C : nullptr;
    for (int i = tid * V; i < C; i += step) {
      backward_pack<V, kRms>(load_raw<V>(dr + i), load_raw<V>(xr + i), w, dres ? load_raw<V>(dres + i) : RawVec<V, T>{},
                             dres != nullptr, dx + row * C, i, m, rs, mg, mgx, smem_dw + i, smem_db + i,
                             sum_dx ? smem_ds + i : nullptr);
    }
  }
  const int parts = kRms ? 1 : sum_dx ? 3 : 2;  // dw (and db, and dx's sums)
  float* const prow = partial + int64_t(blockIdx.x) * parts * C;
  for (int i = tid * V; i < C; i += step)
    for (int k = 0; k < V; ++k) {
      prow[i + k] = smem_dw[i + k];
      if constexpr (!kRms) prow[C + i + k] = smem_db[i + k];
      if (sum_dx) prow[2 * C + i + k] = smem_ds[i + k];
    }
}

namespace {
// The launcher's body, shared by LayerNorm (kRms false) and RMSNorm: which
// kernel instance, the vector width, the grid; then the reduce.
template <bool kRms>
void norm_backward(const char* fn, gpu::Storage st, const void* dout, const void* x, const void* w, const float* mean,
                   const float* rstd, const void* dresidual, void* dx, void* dw, void* db, float* dx_sums,
                   gpu::ParamGrads param_grads, float* scratch, int64_t N, int64_t C, void* stream) {
  if (C == 0) return;
  ENGINE_CHECK(param_grads == gpu::ParamGrads::storage || st != gpu::Storage::f32, fn,
               ": fp32 weight gradients are for 16-bit storage");
  ENGINE_CHECK(C <= gpu::kLayernormBackwardMaxC, fn, ": rows of ", C, " elements exceed the ",
               gpu::kLayernormBackwardMaxC, " the shared-memory dweight/dbias accumulators hold");
  const bool sums = dx_sums != nullptr;
  ENGINE_CHECK(!sums || C <= gpu::kLayernormBackwardMaxCSums, fn, ": dx's column sums of rows of ", C,
               " elements exceed the ", gpu::kLayernormBackwardMaxCSums,
               " a third shared-memory accumulator leaves room for");
  dispatch_storage(st, [&]<typename T>() {
    const T* pd = static_cast<const T*>(dout);
    const T* px = static_cast<const T*>(x);
    const T* pw = static_cast<const T*>(w);
    const T* pr = static_cast<const T*>(dresidual);
    T* pdx = static_cast<T*>(dx);
    constexpr int P = Pack128<T>::size;
    const bool vec = rowwise::rows_vectorizable<T>(C, dout, x, dx) && aligned16(w, dresidual);
    const int64_t per_lane = vec ? P : 1;
    const int64_t iters = (C + 32 * per_lane - 1) / (32 * per_lane);  // a lane's elements of a row, in packs
    const size_t smem = size_t((sums ? 3 : 2) * C + 64) * sizeof(float);
    int nblocks = 0;
    if (N > 0 && iters <= 8) {
      // The warp kernel: the row's share of each lane in registers.
      const int64_t cap = kMaxGrid < gpu::kLayernormBackwardWarpBlocks ? kMaxGrid : gpu::kLayernormBackwardWarpBlocks;
      auto grid = [&](int64_t warps) {
        const int64_t want = (N + warps - 1) / warps;
        return int(want < cap ? want : cap);
      };
      // Staged, the row's packs in registers take 160-190 registers (16-bit
      // packs): one block an SM, not two. On the H200 that paid at GPT-2's
      // 65,536 rows (48% -> 51% of HBM) and cost at 8,192 (28% -> 22%: the
      // 256 blocks in two waves, a warp's 4 rows too few to hide them), so
      // only a long grid-stride takes it: 16 rows a warp or more. At three
      // packs a lane its block is 12 warps (kStagedWarps), at four 8.
      // With dx's column sums (kSum: 24 floats a lane more at GPT-2's C =
      // 768) the staged kernel at three packs still fits 12 warps: 168
      // registers (ptxas -v, sm_90, bf16; 168 at most), no spill.
      const int64_t staged_warps = iters == 3 ? kStagedWarps : kBackwardWarps;
      const gpu::LayernormBackwardForm form = gpu::layernorm_backward_form();
      // A form asked for by name (ENGINE_LAYERNORM_BACKWARD=prefetch or
      // staged) takes its kernel at any number of rows: for tests that
      // hold the two to the same bits on a GPU's grid as on the emulator's.
      const bool asked = vec && form != gpu::LayernormBackwardForm::automatic;
      const bool staged = iters >= 3 && iters <= 4 && (N >= 16 * staged_warps * grid(staged_warps) || asked);
      // The prefetching form of the staged kernel (the next row's copy in
      // flight) where the block's row buffers fit the device's shared
      // memory (GPT-2's C = 768 in bf16: 117 KiB of sm_90's 227, sm_80's 163).
      const size_t prefetch_bytes = size_t(prefetch_smem_bytes(C, int(staged_warps), int(iters)));
      const bool may_prefetch = staged && vec && form != gpu::LayernormBackwardForm::staged;
      const size_t optin = may_prefetch ? device_limits().smem_optin : 0;  // queried only where it decides
      const bool prefetch = may_prefetch && prefetch_bytes <= optin;
      nblocks = grid(staged ? staged_warps : kBackwardWarps);
      auto launch = [&]<int V, int kIters, bool kStaged, int kWarps, bool kSum>() {
        if constexpr (kStaged && V * sizeof(T) == 16) {  // copies of 16-byte packs
          if (prefetch) {
            constexpr auto kernel = layernorm_backward_prefetch_kernel<T, V, kIters, kRms, kWarps, kSum>;
            // Once a kernel, so the most the device allows: a wider row
            // later (C = 1024 after 1000, one instance) asks for more.
            gpu::allow_dynamic_smem<kernel>(optin);
            LAUNCH_KERNEL(kernel, unsigned(nblocks), 32 * kWarps, prefetch_bytes, as_stream(stream), pd, px, pw, mean,
                          rstd, pr, pdx, scratch, N, int(C));
            return;
          }
        }
        LAUNCH_KERNEL((layernorm_backward_warp_kernel<T, V, kIters, kRms, kStaged, kWarps, kSum>), unsigned(nblocks),
                      32 * kWarps, smem, as_stream(stream), pd, px, pw, mean, rstd, pr, pdx, scratch, N, int(C));
      };
      auto by_iters = [&]<int V, bool kSum>() {
        // No kIters = 1: ptxas (CUDA 13, sm_90) spills 12 bytes in the f32
        // instantiation at 48 registers; rows of one pack a lane take 2.
        if (iters <= 2)
          launch.template operator()<V, 2, false, kBackwardWarps, kSum>();
        else if (staged && iters == 3)  // GPT-2's C = 768 in 16-bit packs: no idle pack's registers
          launch.template operator()<V, 3, true, kStagedWarps, kSum>();
        else if (staged)
          launch.template operator()<V, 4, true, kBackwardWarps, kSum>();
        else if (iters <= 4)
          launch.template operator()<V, 4, false, kBackwardWarps, kSum>();
        else
          launch.template operator()<V, 8, false, kBackwardWarps, kSum>();
      };
      auto by_sums = [&]<int V>() {
        if constexpr (!kRms)
          if (sums) return by_iters.template operator()<V, true>();
        by_iters.template operator()<V, false>();
      };
      if (vec)
        by_sums.template operator()<P>();
      else
        by_sums.template operator()<1>();
    } else if (N > 0) {
      // Wider rows: a block per row, a thread per V elements (at most 256).
      const int64_t threads_needed = (C + per_lane - 1) / per_lane;
      const unsigned threads = unsigned(threads_needed >= 256 ? 256 : (threads_needed + 31) / 32 * 32);
      const int64_t cap = kMaxGrid < gpu::kLayernormBackwardMaxBlocks ? kMaxGrid : gpu::kLayernormBackwardMaxBlocks;
      nblocks = int(N < cap ? N : cap);
      if (vec)
        LAUNCH_KERNEL((layernorm_backward_kernel<T, P, kRms>), unsigned(nblocks), threads, smem, as_stream(stream), pd,
                      px, pw, mean, rstd, pr, pdx, scratch, N, int(C), sums);
      else
        LAUNCH_KERNEL((layernorm_backward_kernel<T, 1, kRms>), unsigned(nblocks), threads, smem, as_stream(stream), pd,
                      px, pw, mean, rstd, pr, pdx, scratch, N, int(C), sums);
    }  // no rows: the reduce's sums of no partial rows write dw, db (and dx's sums) as 0
    const int cols = int(kRms ? C : sums ? 3 * C : 2 * C);
    const dim3 grid = grid_for((cols + 31) / 32, 1), block(32, kReduceRows);
    const float* part = static_cast<const float*>(scratch);
    if (param_grads == gpu::ParamGrads::f32)
      LAUNCH_KERNEL((partial_sums_reduce_kernel<float, false>), grid, block, 0, as_stream(stream), part,
                    static_cast<float*>(dw), static_cast<float*>(db), dx_sums, nblocks, int(C), cols);
    else if (param_grads == gpu::ParamGrads::f32_add)
      LAUNCH_KERNEL((partial_sums_reduce_kernel<float, true>), grid, block, 0, as_stream(stream), part,
                    static_cast<float*>(dw), static_cast<float*>(db), dx_sums, nblocks, int(C), cols);
    else
      LAUNCH_KERNEL((partial_sums_reduce_kernel<T, false>), grid, block, 0, as_stream(stream), part,
                    static_cast<T*>(dw), static_cast<T*>(db), dx_sums, nblocks, int(C), cols);
  });
}
}  // namespace

void fused_residual_layernorm_backward(gpu::Storage st, const void* dout, const void* x, const void* w,
                                       const float* mean, const float* rstd, const void* dresidual, void* dx, void* dw,
                                       void* db, float* dx_sums, gpu::ParamGrads param_grads, float* scratch, int64_t N,
                                       int64_t C, void* stream) {
  norm_backward<false>("fused_residual_layernorm_backward", st, dout, x, w, mean, rstd, dresidual, dx, dw, db, dx_sums,
                       param_grads, scratch, N, C, stream);
}

void fused_residual_rmsnorm_backward(gpu::Storage st, const void* dout, const void* x, const void* w, const float* rstd,
                                     const void* dresidual, void* dx, void* dw, gpu::ParamGrads param_grads,
                                     float* scratch, int64_t N, int64_t C, void* stream) {
  norm_backward<true>("fused_residual_rmsnorm_backward", st, dout, x, w, nullptr, rstd, dresidual, dx, dw, nullptr,
                      nullptr, param_grads, scratch, N, C, stream);
}

}  // namespace eng::ENGINE_GPU_NS
