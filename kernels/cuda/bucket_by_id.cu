// Token positions bucketed by id on the GPU (bucket_by_id.h), for the
// embedding's backward: a stable LSD radix sort of the rows, 8 bits a pass.
// Reference: cpu::bucket_by_id (kernels/cpu/embedding.cpp); walk-through:
// docs/kernels/embedding.md.
//
// The key of position i is its row r(i) = ids[i] - start, or V for an id
// outside the table (sorted last, in no bucket). A pass sorts the (row,
// position) pairs by one 8-bit digit of the row, keeping the order of the
// previous pass among equal digits (stable), in three kernels:
//   count:   tile t's digit counts, hist[d * tiles + t] (digit-major, so
//   scan:    an exclusive scan turns them into each (digit, tile)'s first slot),
//   scatter: each pair to hist[d * tiles + t] + its rank among the tile's
//            earlier pairs of digit d.
// After the passes the rows are sorted and, within a row, the positions
// increase (each pass is stable and the first takes them in order); a last
// kernel finds each row's start by binary search. All integer work with no
// atomics: the result is a pure function of the ids.
// The counts and ranks are plain loops over the tile's digits in shared
// memory (256 compares a thread): simple, and a few microseconds a tile.
#include "kernels/cuda/bucket_by_id.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

using gpu::kBucketTile;
constexpr int kDigitMask = (1 << gpu::kBucketDigitBits) - 1;
static_assert(kBucketTile == kDigitMask + 1, "thread d of a tile counts digit d");

// The row of position i on the first pass (keys == nullptr), its sorted row after.
__device__ inline int32_t bucket_key(const int32_t* ids, const int32_t* keys, int64_t i, int64_t start, int64_t V) {
  if (keys) return keys[i];
  const int64_t r = int64_t(ids[i]) - start;
  return int32_t(r >= 0 && r < V ? r : V);
}

// hist[d * tiles + t] = the pairs of tile t whose digit (key >> shift) & 255 is d.
// Launch: grid-stride over the tiles, kBucketTile threads.
// bytes = 4 n (keys) + 4 H (counts written), H = 256 tiles; flops = 0.
// (Thread d's writes stride by `tiles`: uncoalesced, H small beside the rows.)
__global__ void __launch_bounds__(kBucketTile)
    bucket_count_kernel(const int32_t* __restrict__ ids, const int32_t* __restrict__ keys, int64_t n, int64_t start,
                        int64_t V, int shift, int32_t* __restrict__ hist, int64_t tiles) {
  __shared__ int32_t digit[kBucketTile];
  const int tid = int(threadIdx.x);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t i = t * kBucketTile + tid;
    digit[tid] = i < n ? (bucket_key(ids, keys, i, start, V) >> shift) & kDigitMask : -1;
    __syncthreads();
    int32_t count = 0;
    for (int s = 0; s < kBucketTile; ++s) count += digit[s] == tid;
    hist[int64_t(tid) * tiles + t] = count;
    __syncthreads();  // digit is refilled by the next tile
  }
}

// a[k] = a[0] + ... + a[k - 1] (exclusive), in place. Launch: one block of
// kScanThreads. The array goes by chunks of kScanChunk: the chunk's
// elements loaded coalesced (thread t the elements t + j kScanThreads) into
// shared memory, each thread then scans its kScanPer consecutive ones
// there, a shuffle scan of the threads' sums within each warp and of the
// warps' sums gives each thread its offset, and the chunk goes back the way
// it came. The next chunk's loads are issued before this one is scanned, so
// their trip overlaps the scan. (It was one thread a contiguous slice of
// total / 1024 counts, loaded one after the other 256 B apart: at GPT-2's B
// 64, 65,536 counts, 64 serial loads and stores a thread, most of the 0.33
// ms the seven launches took on the H200.) Integer sums: exact, the same
// result in any order.
// bytes = 8 H (read, written); flops = 0.
constexpr int kScanThreads = 1024, kScanPer = 4, kScanChunk = kScanThreads * kScanPer;
__global__ void __launch_bounds__(kScanThreads) bucket_scan_kernel(int32_t* __restrict__ a, int64_t total) {
  __shared__ int32_t chunk[kScanChunk];
  __shared__ int32_t warp_sums[kScanThreads / 32];
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  int32_t next[kScanPer];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int j = 0; j < kScanPer; ++j) {
      const int64_t k = base + int64_t(j) * kScanThreads + tid;
      next[j] = k < total ? a[k] : 0;
    }
  };
  load(0);
  int32_t carry = 0;  // the sum of the chunks before
  for (int64_t base = 0; base < total; base += kScanChunk) {
#pragma unroll
    for (int j = 0; j < kScanPer; ++j) chunk[j * kScanThreads + tid] = next[j];
    if (base + kScanChunk < total) load(base + kScanChunk);
    __syncthreads();
    int32_t v[kScanPer], sum = 0;
#pragma unroll
    for (int j = 0; j < kScanPer; ++j) {
      v[j] = chunk[tid * kScanPer + j];
      sum += v[j];
    }
    int32_t incl = sum;  // the warp's inclusive scan of the threads' sums
    for (int o = 1; o < 32; o *= 2) {
      const int32_t y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    const int32_t ws = warp_sums[lane];  // every warp scans the 32 warps' sums itself
    int32_t wincl = ws;
    for (int o = 1; o < 32; o *= 2) {
      const int32_t y = __shfl_up_sync(0xffffffffu, wincl, o);
      if (lane >= o) wincl += y;
    }
    const int32_t warp_before = __shfl_sync(0xffffffffu, wincl - ws, warp);
    const int32_t chunk_sum = __shfl_sync(0xffffffffu, wincl, 31);
    int32_t run = carry + warp_before + incl - sum;
#pragma unroll
    for (int j = 0; j < kScanPer; ++j) {
      chunk[tid * kScanPer + j] = run;
      run += v[j];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kScanPer; ++j) {
      const int64_t k = base + int64_t(j) * kScanThreads + tid;
      if (k < total) a[k] = chunk[j * kScanThreads + tid];
    }
    // No barrier before the next chunk: after the one above, a thread reads
    // only its own slots of the coalesced layout, the ones it refills next;
    // warp_sums is rewritten only after the next chunk's first barrier.
    carry += chunk_sum;
  }
}

// Each pair of tile t to its slot: hist[d * tiles + t] (scanned) plus the
// number of the tile's earlier pairs with digit d. The positions are i on
// the first pass (vals == nullptr). Launch: as the count.
// bytes = 4 n (keys) + 4 n (vals, not on the first pass) + 4 H + 8 n (written); flops = 0.
__global__ void __launch_bounds__(kBucketTile)
    bucket_scatter_kernel(const int32_t* __restrict__ ids, const int32_t* __restrict__ keys,
                          const int32_t* __restrict__ vals, int64_t n, int64_t start, int64_t V, int shift,
                          const int32_t* __restrict__ hist, int64_t tiles, int32_t* __restrict__ keys_out,
                          int32_t* __restrict__ vals_out) {
  __shared__ int32_t digit[kBucketTile];
  const int tid = int(threadIdx.x);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t i = t * kBucketTile + tid;
    const int32_t key = i < n ? bucket_key(ids, keys, i, start, V) : 0;
    const int d = i < n ? (key >> shift) & kDigitMask : -1;
    digit[tid] = d;
    __syncthreads();
    if (i < n) {
      int32_t rank = 0;
      for (int s = 0; s < tid; ++s) rank += digit[s] == d;
      const int32_t slot = hist[int64_t(d) * tiles + t] + rank;
      keys_out[slot] = key;
      vals_out[slot] = vals ? vals[i] : int32_t(i);
    }
    __syncthreads();
  }
}

// row_start[v] = the first sorted position whose row is >= v (a lower bound),
// for v in [0, V]: rows no position names get an empty range.
// Launch: grid-stride over the V + 1 starts, 256 threads.
// bytes = 4 n (the sorted rows, read by the searches from cache) + 4 (V + 1); flops = 0.
__global__ void bucket_starts_kernel(const int32_t* __restrict__ keys, int64_t n, int64_t V,
                                     int32_t* __restrict__ row_start) {
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v <= V; v += int64_t(gridDim.x) * blockDim.x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    row_start[v] = int32_t(lo);
  }
}

void bucket_by_id(const int32_t* ids, int64_t n, int64_t start, int64_t V, int32_t* d_order, int32_t* d_row_start,
                  int32_t* workspace, void* stream) {
  ENGINE_CHECK(n >= 0 && n < (int64_t(1) << 31) && V >= 0 && V < (int64_t(1) << 31), "bucket_by_id: ", n,
               " positions of a table of ", V, " rows (both must fit int32)");
  cudaStream_t s = as_stream(stream);
  const int64_t tiles = gpu::bucket_tiles(n);
  const int passes = gpu::bucket_passes(V);
  // The workspace: rows of even passes, rows of odd passes, the positions'
  // second buffer, the counts. Pass p writes its positions to d_order when
  // passes - 1 - p is even, so the last pass ends there.
  int32_t* rows[2] = {workspace, workspace + n};
  int32_t* pos[2] = {d_order, workspace + 2 * n};
  int32_t* hist = workspace + 3 * n;
  if (n > 0)
    for (int p = 0; p < passes; ++p) {
      const int shift = p * gpu::kBucketDigitBits;
      const int32_t* keys_in = p == 0 ? nullptr : rows[(p - 1) % 2];
      const int32_t* vals_in = p == 0 ? nullptr : pos[(passes - p) % 2];
      int32_t* keys_out = rows[p % 2];
      int32_t* vals_out = pos[(passes - 1 - p) % 2];
      LAUNCH_KERNEL(bucket_count_kernel, grid_for(tiles, 1), unsigned(kBucketTile), 0, s, ids, keys_in, n, start, V,
                    shift, hist, tiles);
      LAUNCH_KERNEL(bucket_scan_kernel, 1u, unsigned(kScanThreads), 0, s, hist, kBucketTile * tiles);
      LAUNCH_KERNEL(bucket_scatter_kernel, grid_for(tiles, 1), unsigned(kBucketTile), 0, s, ids, keys_in, vals_in, n,
                    start, V, shift, hist, tiles, keys_out, vals_out);
    }
  LAUNCH_KERNEL(bucket_starts_kernel, grid_for(V + 1, 256), 256u, 0, s, rows[(passes - 1) % 2], n, V, d_row_start);
}

}  // namespace eng::ENGINE_GPU_NS
