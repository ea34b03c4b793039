// A linear layer's bias gradient apart from its GEMM (bias_grad.h): column
// sums of a tall (rows, cols) gradient, in two kernels with no atomics.
//   1. bias_grad_partial_kernel: a block of 8 warps takes one (slab, chunk)
//      item at a time: a slab is 32 lanes x V columns (V: a 16-byte pack,
//      or 1 where the rows are not whole aligned packs), a chunk is a run
//      of rows. Warp w sums rows w, w + 8, ... of the chunk in registers,
//      kUnroll rows' loads in flight before it adds them in row order; the
//      8 warps' sums are added in warp order into the chunk's row of
//      partial sums.
//   2. partial_sums_reduce_kernel (partial_sums.cuh): the chunks' rows added
//      in chunk order, written or added to db.
// Reference: cpu::bias_backward (kernels/cpu/elementwise.cpp).
// bytes and flops: bias_grad.h.
#include <climits>

#include "kernels/cuda/bias_grad.h"
#include "kernels/cuda/partial_sums.cuh"
#include "kernels/cuda/rowwise.cuh"

namespace eng::ENGINE_GPU_NS {

using rowwise::load_raw;
using rowwise::RawVec;

namespace {
constexpr int kWarps = 8, kUnroll = 4;
}  // namespace

// Launch: kWarps x 32 threads, grid-stride over slabs x chunks items. Four
// blocks an SM in the launch bounds: left to itself ptxas (CUDA 13, sm_90)
// kept 32-34 registers, issued two of the four loads before adding (and
// spilled 4 bytes in f32); with up to 64 it issues all four first, no spill.
// Preconditions: V > 1 only if cols % V == 0 and g is 16-byte aligned.
template <typename T, int V>
__global__ void __launch_bounds__(32 * kWarps, 4)
    bias_grad_partial_kernel(const T* __restrict__ g, int64_t rows, int cols, int64_t chunks, int64_t chunk_rows,
                             float* __restrict__ partial) {
  constexpr int kSlab = 32 * V;
  __shared__ float red[kWarps][kSlab];
  const int lane = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  const int64_t slabs = (cols + kSlab - 1) / kSlab;
  for (int64_t item = blockIdx.x; item < slabs * chunks; item += gridDim.x) {
    const int64_t slab = item % slabs, chunk = item / slabs;
    const int c = int(slab) * kSlab + lane * V;
    const int64_t r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float acc[V];
    for (int k = 0; k < V; ++k) acc[k] = 0.f;
    if (c < cols) {
      // The warp's rows r0 + warp, + 8, ... in order: kUnroll at a time with
      // no guard while all are in the chunk (their loads issued together;
      // a guarded load compiles to a branch around the load and its use,
      // one row in flight), then one at a time.
      int64_t r = r0 + warp;
      const int64_t step = int64_t(kWarps) * cols;  // elements from a warp's row to its next
#pragma unroll 1
      for (; r + int64_t(kUnroll - 1) * kWarps < r1; r += int64_t(kWarps) * kUnroll) {
        const T* p = g + r * cols + c;
        RawVec<V, T> x[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) x[u] = load_raw<V>(p + u * step);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] += to_f32(x[u].v[k]);
      }
      for (; r < r1; r += kWarps) {
        const RawVec<V, T> x = load_raw<V>(g + r * cols + c);
        for (int k = 0; k < V; ++k) acc[k] += to_f32(x.v[k]);
      }
    }
    for (int k = 0; k < V; ++k) red[warp][lane * V + k] = acc[k];
    __syncthreads();
    for (int t = int(threadIdx.x); t < kSlab; t += int(blockDim.x)) {
      const int col = int(slab) * kSlab + t;
      if (col < cols) {
        float s = 0.f;
        for (int w = 0; w < kWarps; ++w) s += red[w][t];
        partial[chunk * cols + col] = s;
      }
    }
    __syncthreads();  // red is refilled by the next item
  }
}

void bias_grad(gpu::Storage st, const void* g, int64_t rows, int64_t cols, float* scratch, void* db, bool db_f32,
               bool add, void* stream) {
  ENGINE_CHECK(rows >= 0 && cols >= 0 && cols <= INT_MAX / 2, "bias_grad: a gradient of ", rows, " x ", cols);
  ENGINE_CHECK(!add || db_f32, "bias_grad: sums are added into fp32 gradients only");
  if (cols == 0) return;
  const int64_t chunks = gpu::bias_grad_chunks(rows);
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  dispatch_storage(st, [&]<typename T>() {
    constexpr int P = Pack128<T>::size;
    const T* pg = static_cast<const T*>(g);
    auto partials = [&]<int V>() {
      const int64_t items = (cols + 32 * V - 1) / (32 * V) * chunks;
      LAUNCH_KERNEL((bias_grad_partial_kernel<T, V>), grid_for(items, 1), 32 * kWarps, 0, as_stream(stream), pg, rows,
                    int(cols), chunks, chunk_rows, scratch);
    };
    if (rowwise::rows_vectorizable<T>(cols, g))
      partials.template operator()<P>();
    else
      partials.template operator()<1>();
    const dim3 grid = grid_for((cols + 31) / 32, 1), block(32, kReduceRows);
    if (db_f32 && add)
      LAUNCH_KERNEL((partial_sums_reduce_kernel<float, true>), grid, block, 0, as_stream(stream), scratch,
                    static_cast<float*>(db), static_cast<float*>(nullptr), nullptr, int(chunks), int(cols), int(cols));
    else if (db_f32)
      LAUNCH_KERNEL((partial_sums_reduce_kernel<float, false>), grid, block, 0, as_stream(stream), scratch,
                    static_cast<float*>(db), static_cast<float*>(nullptr), nullptr, int(chunks), int(cols), int(cols));
    else
      LAUNCH_KERNEL((partial_sums_reduce_kernel<T, false>), grid, block, 0, as_stream(stream), scratch,
                    static_cast<T*>(db), static_cast<T*>(nullptr), nullptr, int(chunks), int(cols), int(cols));
  });
}

}  // namespace eng::ENGINE_GPU_NS
