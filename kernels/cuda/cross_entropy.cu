// Fused softmax cross-entropy over the vocabulary (llm.c's fused_classifier):
// one kernel reads each row of logits and writes both the row's loss and its
// gradient, without ever storing the probabilities. Reference:
// kernels/cpu/cross_entropy.cpp; walk-through: docs/kernels/cross_entropy.md.
//   lse_r      = log sum_v exp(x_rv)                 (x = logits, row r)
//   loss_r     = lse_r - x_r,target_r                (fp32, 0 for ignored rows)
//   dlogits_rv = dloss_scale * (exp(x_rv - lse_r) - [v == target_r])
// Rows whose target is ignore_index get loss 0 and dlogits 0. Rows are ld >= V
// elements apart: a vocabulary padded to a multiple of 64 for the lm_head's
// aligned GEMMs (models/gpt2) has V classes in rows of ld, and dlogits is 0
// in the padding, so the GEMMs that read it add nothing there. Because the loss
// is the graph's last op, the engine calls this in the forward pass with
// dloss_scale = seed/valid (the seed the training step will backpropagate
// from: 1/grad_accum) and keeps dlogits for the backward, which only
// rescales it (cross_entropy_scale_grad) when another gradient arrives.
// The scalars (1/valid, the mean loss, the incoming gradient) stay on the
// device: no host round trip, so a CUDA graph can capture the whole loss.
// Conventions: fp32 math whatever the storage T; dlogits written with =.
#include <cmath>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kMaxThreads = 512;
// The most a block keeps of its row in shared memory: GPT-2's bf16 row
// (100.5 KB), two blocks of 512 threads an SM on sm_90 (227 KiB), one on
// sm_80 (164 KiB); a longer row is read twice from global memory.
constexpr size_t kMaxCachedRowBytes = 104 * 1024;
// Pass 1's loads in flight a thread (16-byte packs; see the kernel). Two
// blocks an SM (the launch bounds) hold ptxas to 64 registers, which it then
// uses without the one spill it made when left to itself with 4 packs.
constexpr int kUnroll = 4;
// The prefetching kernel's block: one an SM, its two row buffers taking
// most of the shared memory.
constexpr int kPrefetchThreads = 1024;
}  // namespace

// The row's dlogits past its 16-byte packs, both kernels': the V % pack
// classes one by one from global memory, then 0 in the padding [V, ld).
template <typename T>
__device__ __forceinline__ void write_tail(const T* x, T* d, int64_t vec_end, int64_t V, int64_t ld, int32_t target,
                                           float lse, float dloss_scale) {
  for (int64_t v = vec_end + threadIdx.x; v < V; v += blockDim.x) {
    const float onehot = v == target ? 1.f : 0.f;
    d[v] = from_f32<T>(dloss_scale * (exp2_approx((to_f32(x[v]) - lse) * kLog2e) - onehot));
  }
  for (int64_t v = V + threadIdx.x; v < ld; v += blockDim.x) d[v] = from_f32<T>(0.f);
}

// The fused classifier. Launch: grid-stride over rows, one block per row,
// grid_for(N, 1) blocks of a multiple of 32 threads (<= 512, about one 16-byte
// pack per thread for small V). Pass 1 folds the row into per-thread MaxSums
// (one read of the logits; a 16-byte pack at a time, its max first: fold_n,
// kUnroll packs loaded before the first is folded),
// the block merges them into lse; pass 2 reads the row again and writes
// dlogits (skipped when dlogits is nullptr: inference). Exponentials are
// exp2.cuh's: in SASS (sm_90, bf16) the two passes' loops issue 70 and 82
// instructions a pack of 8, about 19 a logit, against about 38 with fold,
// expf and a 64-bit target test a value; the H200's HBM leaves about 28 a
// logit to stay memory-bound (4 bytes a logit; 132 SMs, 128 lanes a cycle).
// kCache (with kVec): pass 1 also keeps each 16-byte pack in dynamic shared
// memory, V / pack packs (the launch's smem bytes), and pass 2 reads it
// there: one read of the row from DRAM instead of two, which L2 does not
// absorb (GPT-2 at B 8 on the H200: 1.65 GB at 40% of HBM without it, rows
// of 100 KB in 2 x 132 blocks overrunning its L2). Each thread reads back
// only the packs it wrote, so no barrier guards them.
// Preconditions: targets in [0, V) or == ignore_index (checked by the engine);
// kVec only if logits and dlogits are 16-byte aligned and ld % pack == 0, so
// that every row starts on a pack (a tail of V % pack classes is scalar).
// bytes = 2 N V sizeof(T) reads + N ld sizeof(T) writes + 8 N (targets, losses);
//         N V sizeof(T) reads with kCache; N V sizeof(T) without dlogits.
// flops ~ 5 N V (max/compare, exp, add) + 4 N V for dlogits (exp counted as 1 SFU op).
template <typename T, bool kVec, bool kCache>
__global__ void __launch_bounds__(kMaxThreads, 2)
    cross_entropy_fused_kernel(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                               float* __restrict__ losses, T* __restrict__ dlogits, int64_t N, int64_t V, int64_t ld,
                               const float* __restrict__ dloss_scale_ptr, int32_t ignore_index) {
  static_assert(kVec || !kCache, "the row is cached by 16-byte packs");
  __shared__ MaxSum smem_part[32];
  DYNAMIC_SMEM(T, cached);  // [V / pack * pack] with kCache
  const float dloss_scale = dlogits ? *dloss_scale_ptr : 0.f;
  constexpr int P = Pack128<T>::size;
  const int64_t vec_end = kVec ? V / P * P : 0;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T* x = logits + r * ld;
    T* d = dlogits ? dlogits + r * ld : nullptr;
    const int32_t target = targets[r];
    if (target == ignore_index) {  // the same for the whole block, so no thread skips a barrier alone
      if (threadIdx.x == 0) losses[r] = 0.f;
      if (d)
        for (int64_t v = threadIdx.x; v < ld; v += blockDim.x) d[v] = from_f32<T>(0.f);
      continue;
    }
    MaxSum acc{-INFINITY, 0.f};
    // kUnroll packs loaded before the first is folded: 64 bytes a thread in
    // flight, not 16 (about 64 KB an SM at two blocks of 512, where the H200
    // needs about 25 KB to keep its HBM busy). The fold order is unchanged.
    auto fold_pack = [&](const Pack128<T>& p, int64_t at) {  // the pack of x at `at`: cached, then folded
      if constexpr (kCache)
        if (d) store128(cached + at, p);
      float xs[P];
      for (int k = 0; k < P; ++k) xs[k] = to_f32(p.v[k]);
      fold_n(acc, xs);
    };
    const int64_t step = int64_t(blockDim.x) * P;
    int64_t w = int64_t(threadIdx.x) * P;
    for (; w + (kUnroll - 1) * step < vec_end; w += kUnroll * step) {
      Pack128<T> p[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) p[u] = load128(x + w + u * step);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fold_pack(p[u], w + u * step);
    }
    for (; w < vec_end; w += step) fold_pack(load128(x + w), w);
    for (int64_t v = vec_end + threadIdx.x; v < V; v += blockDim.x) fold(acc, to_f32(x[v]));
    const MaxSum row = block_merge(acc, smem_part);
    const float lse = row.m + logf(row.s);
    if (threadIdx.x == 0) losses[r] = lse - to_f32(x[target]);
    if (!d) continue;
    for (int64_t v = int64_t(threadIdx.x) * P; v < vec_end; v += int64_t(blockDim.x) * P) {
      const Pack128<T> p = load128((kCache ? cached : x) + v);
      Pack128<T> g;
      // The target's place in this pack, or -1: one 64-bit test a pack, an int compare a value.
      const int at = target >= v && target < v + P ? int(target - v) : -1;
      for (int k = 0; k < P; ++k) {
        const float onehot = k == at ? dloss_scale : 0.f;  // dloss_scale (p - 1) at the target
        g.v[k] = from_f32<T>(fmaf(dloss_scale, exp2_approx((to_f32(p.v[k]) - lse) * kLog2e), -onehot));
      }
      store128(d + v, g);
    }
    write_tail(x, d, vec_end, V, ld, target, lse, dloss_scale);
  }
}

// The fused classifier with the next row's copy in flight (sm_80's
// cp.async): one block an SM, persistent over its rows, two row buffers in
// dynamic shared memory. While the block works on row r in one buffer, its
// next row (r + gridDim.x) is copied into the other, so the HBM reads never
// wait on the block's reductions and writes. In the kCache kernel above they
// alternate with them: a block's loads stop while it merges and writes its
// row, and two blocks an SM did not fill the gaps (66% of the H200's HBM at
// GPT-2's B 64). Three passes over the row in shared memory: its max m; s =
// the sum of 2^((x - m) log2 e); dlogits, as the kCache kernel writes them
// (the same expression and rounding: with the same lse, the same bits).
// The three loops issue 27, 51 and about 74 instructions a pack of 8 (SASS,
// sm_90, bf16): 19 a logit, as the cached kernel's two, but overlapped with
// the copies. Each row's target comes with the copy of the row before (a
// register, not a load on the row's path), and the target's logit for the
// loss is read from the buffer after the first barrier (every thread's
// packs have landed then; the second barrier keeps its owner from copying
// over it first).
// Each thread copies and reads only its own packs ((tid + k blockDim) P), so
// the buffers need no barrier: a thread's wait_group covers what it reads,
// and it issues the copy over a buffer only after its own last read of it
// (the emulator poisons a copy's destination at issue: a read after would
// see NaN). One commit a row, empty past the last, so wait_group 1 always
// leaves exactly the next row's copy pending.
// Launch: min(N, SMs) blocks of a multiple of 32 threads (<= 1024), dynamic
// smem 2 (V / pack) pack sizeof(T) (GPT-2's bf16 rows: 196.5 KiB of sm_90's
// 227). Preconditions: as the kCache kernel, and dlogits != nullptr.
// bytes = N V sizeof(T) reads + N ld sizeof(T) writes + 8 N (targets, losses);
// flops ~ 9 N V (max, exp, add; exp, scale), an exp counted as 1 SFU op.
template <typename T>
__global__ void __launch_bounds__(kPrefetchThreads, 1)
    cross_entropy_prefetch_kernel(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                                  float* __restrict__ losses, T* __restrict__ dlogits, int64_t N, int64_t V, int64_t ld,
                                  const float* __restrict__ dloss_scale_ptr, int32_t ignore_index) {
  __shared__ float part_max[32], part_sum[32];
  DYNAMIC_SMEM(T, rows);  // [2][V / P * P]
  constexpr int P = Pack128<T>::size;
  const float dloss_scale = *dloss_scale_ptr;
  const int64_t vec_end = V / P * P, first = int64_t(threadIdx.x) * P, step = int64_t(blockDim.x) * P;
  auto prefetch = [&](int64_t r, T* buf) {
    if (r < N)
      for (int64_t w = first; w < vec_end; w += step) tc::cp_async_cg(tc::smem_addr(buf + w), logits + r * ld + w);
    tc::cp_async_commit();
  };
  prefetch(blockIdx.x, rows);
  int32_t next_target = blockIdx.x < N ? targets[blockIdx.x] : 0;
  int turn = 0;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x, ++turn) {
    const T* const cur = rows + (turn & 1) * vec_end;
    const int32_t target = next_target;
    prefetch(r + gridDim.x, rows + ((turn + 1) & 1) * vec_end);
    if (r + gridDim.x < N) next_target = targets[r + gridDim.x];
    tc::cp_async_wait_group<1>();  // this thread's packs of row r have landed
    const T* x = logits + r * ld;
    T* d = dlogits + r * ld;
    if (target == ignore_index) {  // the same for the whole block: no thread skips a barrier alone
      if (threadIdx.x == 0) losses[r] = 0.f;
      for (int64_t v = threadIdx.x; v < ld; v += blockDim.x) d[v] = from_f32<T>(0.f);
      continue;
    }
    float m = -INFINITY;
    for (int64_t w = first; w < vec_end; w += step) {
      const Pack128<T> p = load128(cur + w);
      for (int k = 0; k < P; ++k) m = fmaxf(m, to_f32(p.v[k]));
    }
    for (int64_t v = vec_end + threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, to_f32(x[v]));
    m = gpu::block_allreduce(m, part_max, -INFINITY, [](float a, float b) { return fmaxf(a, b); });
    const float x_target = threadIdx.x == 0 ? to_f32(target < vec_end ? cur[target] : x[target]) : 0.f;
    // All -inf: subtract 0, so 2^(-inf) = 0, not NaN. A NaN logit, which
    // fmaxf skips, reaches the sum (and the loss) through its exponential.
    const float ms = m == -INFINITY ? 0.f : m;
    float s = 0.f;
    for (int64_t w = first; w < vec_end; w += step) {
      const Pack128<T> p = load128(cur + w);
      for (int k = 0; k < P; ++k) s += exp2_approx((to_f32(p.v[k]) - ms) * kLog2e);
    }
    for (int64_t v = vec_end + threadIdx.x; v < V; v += blockDim.x) s += exp2_approx((to_f32(x[v]) - ms) * kLog2e);
    s = gpu::block_allreduce(s, part_sum, 0.f, [](float a, float b) { return a + b; });
    const float lse = ms + logf(s);
    if (threadIdx.x == 0) losses[r] = lse - x_target;
    for (int64_t w = first; w < vec_end; w += step) {
      const Pack128<T> p = load128(cur + w);
      Pack128<T> g;
      for (int k = 0; k < P; ++k) g.v[k] = from_f32<T>(dloss_scale * exp2_approx((to_f32(p.v[k]) - lse) * kLog2e));
      if (target >= w && target < w + P) {  // dloss_scale (p - 1) at the target, as fmaf(scale, p, -scale)
        const int at = int(target - w);
#pragma unroll
        for (int k = 0; k < P; ++k)  // constant indices: the packs stay in registers, not the stack
          if (k == at)
            g.v[k] = from_f32<T>(fmaf(dloss_scale, exp2_approx((to_f32(p.v[k]) - lse) * kLog2e), -dloss_scale));
      }
      store128(d + w, g);
    }
    write_tail(x, d, vec_end, V, ld, target, lse, dloss_scale);
  }
  tc::cp_async_wait_all();  // no copy outlives the block (the last group is empty)
}

// d *= *scale_ptr in place (a device fp32 scalar, so a loss scale of 65536
// or a factor of 1/3 is not rounded to the storage type first): the backward
// of a loss whose incoming gradient is not the one its forward assumed. Launch: 1-D grid-stride, 256 threads,
// grid_for(n / pack); 16-byte packs when d is aligned, scalar tail.
// bytes = 2 n sizeof(T), flops = n.
template <typename T, bool kVec>
__global__ void cross_entropy_scale_grad_kernel(T* __restrict__ d, const float* __restrict__ scale_ptr, int64_t n) {
  constexpr int P = Pack128<T>::size;
  const float scale = *scale_ptr;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t vec_end = kVec ? n / P * P : 0;
  for (int64_t i = tid * P; i < vec_end; i += stride * P) {
    Pack128<T> p = load128(d + i);
    for (int k = 0; k < P; ++k) p.v[k] = from_f32<T>(scale * to_f32(p.v[k]));
    store128(d + i, p);
  }
  for (int64_t i = vec_end + tid; i < n; i += stride) d[i] = from_f32<T>(scale * to_f32(d[i]));
}

// The two one-block reductions over the rows below. One block, so no
// second kernel and a fixed order; of 1024 threads, each with kSumUnroll
// loads in flight before it adds them in row order: at B 64 x 1024 a block
// of 256 threads adding one row at a time took 0.1 ms each, 1.7 ms of the
// config's step (the H200, the fourth run).
constexpr int kSumThreads = 1024, kSumUnroll = 4;

// counts[0] = grad_scale/valid (0 when no row is valid: the fused kernel's
// dloss_scale, with the seed the loss will be backpropagated from folded
// in), counts[1] = valid, where valid = rows whose target is not
// ignore_index, counted in integers (exact in any order).
// Launch: 1 block of kSumThreads. bytes = 4 N + 8, flops = N.
__global__ void __launch_bounds__(kSumThreads)
    cross_entropy_count_kernel(const int32_t* __restrict__ targets, int64_t N, int32_t ignore_index, float grad_scale,
                               float* __restrict__ counts) {
  long long c = 0;
  for (int64_t r = threadIdx.x; r < N; r += kSumThreads) c += targets[r] != ignore_index;
  c = gpu::block_sum<kSumThreads>(c);
  if (threadIdx.x == 0) {
    counts[0] = c > 0 ? float(double(grad_scale) / double(c)) : 0.f;
    counts[1] = float(c);
  }
}

// *out = sum_r losses[r] / valid, summed in double in a fixed order (thread
// t adds rows t, t + 1024, ... in turn, then the block's sum), stored in T
// (0 when no row is valid). Launch: 1 block of kSumThreads.
// bytes = 4 N + 4 + sizeof(T), flops = N.
template <typename T>
__global__ void __launch_bounds__(kSumThreads)
    cross_entropy_mean_kernel(const float* __restrict__ losses, int64_t N, const float* __restrict__ counts,
                              T* __restrict__ out) {
  double s = 0;
  for (int64_t r0 = threadIdx.x; r0 < N; r0 += int64_t(kSumThreads) * kSumUnroll) {
    float v[kSumUnroll];
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) {
      const int64_t r = r0 + int64_t(u) * kSumThreads;
      v[u] = r < N ? losses[r] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kSumUnroll; ++u) s += double(v[u]);
  }
  s = gpu::block_sum<kSumThreads>(s);
  if (threadIdx.x == 0) *out = from_f32<T>(counts[1] > 0 ? float(s / double(counts[1])) : 0.f);
}

void cross_entropy_count_valid(const int32_t* targets, int64_t N, int32_t ignore_index, float grad_scale, float* counts,
                               void* stream) {
  LAUNCH_KERNEL(cross_entropy_count_kernel, 1, kSumThreads, 0, as_stream(stream), targets, N, ignore_index, grad_scale,
                counts);
}

void cross_entropy_mean(gpu::Storage st, const float* losses, int64_t N, const float* counts, void* out, void* stream) {
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(cross_entropy_mean_kernel<T>, 1, kSumThreads, 0, as_stream(stream), losses, N, counts,
                  static_cast<T*>(out));
  });
}

void cross_entropy_fused(gpu::Storage st, const void* logits, const int32_t* targets, float* losses, void* dlogits,
                         int64_t N, int64_t V, int64_t ld, const float* dloss_scale, int32_t ignore_index,
                         void* stream) {
  if (N == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    constexpr int P = Pack128<T>::size;
    const T* px = static_cast<const T*>(logits);
    T* pd = static_cast<T*>(dlogits);
    // About one pack per thread for small rows (fewer idle threads in the
    // reductions), kMaxThreads for large vocabularies.
    const int64_t want = (V + P - 1) / P;
    auto block_for = [&](int64_t most) {
      const int64_t threads = want >= most ? most : (want + 31) / 32 * 32;
      return unsigned(threads < 32 ? 32 : threads);
    };
    const unsigned block = block_for(kMaxThreads);
    const unsigned grid = grid_for(N, 1);
    const size_t row_bytes = size_t(V / P * P) * sizeof(T);
    const bool packs = aligned16(logits, dlogits) && ld % P == 0 && dlogits && row_bytes > 0;
    const gpu::CrossEntropyForm form = gpu::cross_entropy_form();
    // Left to choose, a row of at least half a block of packs (4096 16-bit
    // classes): its one block an SM would leave a short row's SMs nearly
    // idle (V = 256 is one warp), where the cached kernel runs 1024 blocks.
    const bool may_prefetch = form == gpu::CrossEntropyForm::prefetch ||
                              (form == gpu::CrossEntropyForm::automatic && want >= kPrefetchThreads / 2);
    const bool may_cache = may_prefetch || form == gpu::CrossEntropyForm::cached;
    // The static part_max and part_sum, and a margin, beside the two rows.
    constexpr size_t kStaticBytes = 1024;
    const DeviceLimits dev = packs && may_prefetch ? device_limits() : DeviceLimits{0, 0};
    if (packs && may_prefetch && 2 * row_bytes + kStaticBytes <= dev.smem_optin) {
      gpu::allow_dynamic_smem<cross_entropy_prefetch_kernel<T>>(dev.smem_optin - kStaticBytes);
      const unsigned blocks = unsigned(N < dev.sms ? N : dev.sms);
      LAUNCH_KERNEL(cross_entropy_prefetch_kernel<T>, blocks, block_for(kPrefetchThreads), 2 * row_bytes,
                    as_stream(stream), px, targets, losses, pd, N, V, ld, dloss_scale, ignore_index);
    } else if (packs && may_cache && row_bytes <= kMaxCachedRowBytes) {
      gpu::allow_dynamic_smem<cross_entropy_fused_kernel<T, true, true>>(kMaxCachedRowBytes);
      LAUNCH_KERNEL((cross_entropy_fused_kernel<T, true, true>), grid, block, row_bytes, as_stream(stream), px, targets,
                    losses, pd, N, V, ld, dloss_scale, ignore_index);
    } else if (aligned16(logits, dlogits) && ld % P == 0) {
      LAUNCH_KERNEL((cross_entropy_fused_kernel<T, true, false>), grid, block, 0, as_stream(stream), px, targets,
                    losses, pd, N, V, ld, dloss_scale, ignore_index);
    } else {
      LAUNCH_KERNEL((cross_entropy_fused_kernel<T, false, false>), grid, block, 0, as_stream(stream), px, targets,
                    losses, pd, N, V, ld, dloss_scale, ignore_index);
    }
  });
}

void cross_entropy_scale_grad(gpu::Storage st, void* dlogits, const float* scale, int64_t n, void* stream) {
  if (n == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    T* pd = static_cast<T*>(dlogits);
    const float* scale_ptr = scale;
    const unsigned grid = grid_for(n / Pack128<T>::size + 1, 256);
    if (aligned16(dlogits))
      LAUNCH_KERNEL(cross_entropy_scale_grad_kernel<T, true>, grid, 256, 0, as_stream(stream), pd, scale_ptr, n);
    else
      LAUNCH_KERNEL(cross_entropy_scale_grad_kernel<T, false>, grid, 256, 0, as_stream(stream), pd, scale_ptr, n);
  });
}

}  // namespace eng::ENGINE_GPU_NS
