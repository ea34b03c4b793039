// Adafactor over many tensors (transformers' Adafactor; the math and the
// options are in docs/optimizers.md). Reference: kernels/cpu/adafactor.cpp,
// which sums in double where these kernels sum in fp32 trees, so the two
// agree to a few ulps, not bit for bit.
//
// A step needs statistics of whole tensors before it can update any element
// (the row and column means, the mean of the rows, RMS(u) and RMS(p)), so it
// is seven launches, each over every tensor at once:
//   1. rows:     one block per matrix row: row = b2t row + (1-b2t) mean_c(g^2 + eps1)
//   2. column partials: one block per slab of 64 rows of a tile of 256
//                columns, a thread a column summing its slab's rows in order
//   3. columns:  one thread per column, blocks of 256 columns, each adding
//                its column's slab sums in order: col = ... mean_r(...)
//                (one pass over all the rows, a thread a column, left a
//                4096-column matrix 16 blocks: 6% of HBM for the step)
//   4. row mean: one block per tensor: stats[b] = mean_r row[b, r]
//   5. partials: one block per element chunk: sum u^2 and p^2 over the chunk
//                (vectors first update v there), written to partials[2c, 2c+1]
//   6. finalize: one block per tensor adds its chunks' partials in order:
//                lr = rel_lr (x max(eps2, RMS(p))), divisor = max(1, RMS(u) / clip)
//   7. update:   one block per chunk: u / divisor x lr, the first moment, decay, p -= u
// Sums are in a fixed order (no atomics): the same bits every run.
// bytes per element: g read 4 times (1, 2, 5, 7), p read twice and written
// once: 28 n (+ 8 n with beta1; a vector reads g twice and v twice and writes
// v once: 32 n), plus the row and column statistics (4 (rows + cols) read
// and written) and the column partials (4 n / 64 written, then read);
// flops ~ 20 n.
#include "kernels/cuda/adafactor.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256;

// The descriptor holding item c of a numbering: the last with begin <= c.
// (Tensors without items of this kind share their begin with the next one, so
// the last such descriptor is always one that has items.)
template <int64_t gpu::AdafactorTensor::*Begin>
__device__ __forceinline__ int tensor_of(const gpu::AdafactorTensor* d, int num_tensors, int64_t c) {
  int lo = 0, hi = num_tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (d[mid].*Begin <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float grad_at(const gpu::AdafactorTensor& d, int64_t i, const float* gs) {
  return gs ? d.grad[i] * *gs : d.grad[i];
}

// Element i's matrix b, row r and column c in a factored tensor, walked
// forward by a thread's stride: 64-bit divisions (tens of instructions each
// on a GPU) once at the start and once per wrap of a row, not three per
// element (for 768 columns and a stride of 256: one element in three).
struct RowCol {
  int64_t b = 0, r = 0, c = 0;
  __device__ RowCol(const gpu::AdafactorTensor& d, int64_t i) {
    if (!d.row) return;  // a vector: unused
    const int64_t per = d.rows * d.cols;
    b = i / per, r = i % per / d.cols, c = i % d.cols;
  }
  __device__ void advance(const gpu::AdafactorTensor& d, int64_t step) {
    if (!d.row) return;
    c += step;
    if (c < d.cols) return;
    r += c / d.cols, c %= d.cols;
    if (r < d.rows) return;
    b += r / d.rows, r %= d.rows;
  }
};

// The unclipped update of element i at rc (after kernel 4; vectors read v).
__device__ __forceinline__ float update_at(const gpu::AdafactorTensor& d, int64_t i, const RowCol& rc, float g) {
  if (!d.row) return g * (1.f / sqrtf(d.v[i]));
  return g * (1.f / sqrtf(d.row[rc.b * d.rows + rc.r] / d.stats[rc.b])) * (1.f / sqrtf(d.col[rc.b * d.cols + rc.c]));
}
}  // namespace

// 1. Launch: grid_for(num_rows, 1) x 256. bytes = 4 n + 8 rows; flops = 3 n.
__global__ void adafactor_rows_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt, int64_t num_rows,
                                      gpu::AdafactorConsts k, const float* __restrict__ gs) {
  for (int64_t item = blockIdx.x; item < num_rows; item += gridDim.x) {
    const gpu::AdafactorTensor& d = t[tensor_of<&gpu::AdafactorTensor::row_begin>(t, nt, item)];
    const int64_t r = item - d.row_begin, base = r * d.cols;  // row r of all batch x rows
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < d.cols; c += blockDim.x) {
      const float g = grad_at(d, base + c, gs);
      s += g * g + k.eps1;
    }
    s = gpu::block_sum<kThreads>(s);
    if (threadIdx.x == 0) d.row[r] = d.beta2t * d.row[r] + (1.f - d.beta2t) * (s / float(d.cols));
    __syncthreads();  // block_sum's shared partials are reused by the next item
  }
}

// 2. Launch: grid_for(num_parts, 1) x 256. bytes = 4 n + 4 n / 64; flops = 3 n.
// Item (b, slab, tile), numbered slab-major within a matrix; column c's sum
// over the slab goes to parts[item x 256 + c % 256].
__global__ void adafactor_col_parts_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt, int64_t num_parts,
                                           gpu::AdafactorConsts k, float* __restrict__ parts,
                                           const float* __restrict__ gs) {
  for (int64_t item = blockIdx.x; item < num_parts; item += gridDim.x) {
    const gpu::AdafactorTensor& d = t[tensor_of<&gpu::AdafactorTensor::part_begin>(t, nt, item)];
    const int64_t tiles = (d.cols + gpu::kAdafactorTile - 1) / gpu::kAdafactorTile;
    const int64_t slabs = (d.rows + gpu::kAdafactorSlab - 1) / gpu::kAdafactorSlab, local = item - d.part_begin;
    const int64_t b = local / (slabs * tiles), slab = local / tiles % slabs;
    const int64_t c = local % tiles * gpu::kAdafactorTile + threadIdx.x;
    if (c >= d.cols) continue;
    const int64_t r0 = slab * gpu::kAdafactorSlab;
    const int64_t r1 = r0 + gpu::kAdafactorSlab < d.rows ? r0 + gpu::kAdafactorSlab : d.rows;
    float s = 0.f;
    for (int64_t r = r0; r < r1; ++r) {
      const float g = grad_at(d, (b * d.rows + r) * d.cols + c, gs);
      s += g * g + k.eps1;
    }
    parts[item * gpu::kAdafactorTile + threadIdx.x] = s;
  }
}

// 3. Launch: grid_for(num_tiles, 1) x 256. bytes = 4 n / 64 + 8 cols; flops = n / 64.
__global__ void adafactor_cols_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt, int64_t num_tiles,
                                      const float* __restrict__ parts) {
  for (int64_t item = blockIdx.x; item < num_tiles; item += gridDim.x) {
    const gpu::AdafactorTensor& d = t[tensor_of<&gpu::AdafactorTensor::tile_begin>(t, nt, item)];
    const int64_t tiles = (d.cols + gpu::kAdafactorTile - 1) / gpu::kAdafactorTile, local = item - d.tile_begin;
    const int64_t slabs = (d.rows + gpu::kAdafactorSlab - 1) / gpu::kAdafactorSlab;
    const int64_t b = local / tiles, tile = local % tiles, c = tile * gpu::kAdafactorTile + threadIdx.x;
    if (c >= d.cols) continue;
    // The slab sums of column c, in slab order: items part_begin + (b slabs + slab) tiles + tile.
    const float* p = parts + (d.part_begin + b * slabs * tiles + tile) * gpu::kAdafactorTile + threadIdx.x;
    float s = 0.f;
    for (int64_t slab = 0; slab < slabs; ++slab) s += p[slab * tiles * gpu::kAdafactorTile];
    float& x = d.col[b * d.cols + c];
    x = d.beta2t * x + (1.f - d.beta2t) * (s / float(d.rows));
  }
}

// 4. Launch: grid_for(num_tensors, 1) x 256. bytes = 4 rows; flops = rows.
__global__ void adafactor_row_mean_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt) {
  for (int j = blockIdx.x; j < nt; j += gridDim.x) {
    const gpu::AdafactorTensor& d = t[j];
    if (!d.row) continue;
    for (int64_t b = 0; b < d.batch; ++b) {
      float s = 0.f;
      for (int64_t r = threadIdx.x; r < d.rows; r += blockDim.x) s += d.row[b * d.rows + r];
      s = gpu::block_sum<kThreads>(s);
      if (threadIdx.x == 0) d.stats[b] = s / float(d.rows);
      __syncthreads();
    }
  }
}

// 5. Launch: grid_for(num_chunks, 1) x 256. bytes = 8 n (+ 8 n for v); flops ~ 8 n.
__global__ void adafactor_partials_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt, int64_t num_chunks,
                                          gpu::AdafactorConsts k, float* __restrict__ partials,
                                          const float* __restrict__ gs) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const gpu::AdafactorTensor& d = t[tensor_of<&gpu::AdafactorTensor::chunk_begin>(t, nt, c)];
    const int64_t begin = (c - d.chunk_begin) * gpu::kMultiTensorChunk;
    const int64_t end = begin + gpu::kMultiTensorChunk < d.n ? begin + gpu::kMultiTensorChunk : d.n;
    float uu = 0.f, pp = 0.f;
    RowCol rc(d, begin + threadIdx.x);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x, rc.advance(d, blockDim.x)) {
      const float g = grad_at(d, i, gs);
      if (!d.row) d.v[i] = d.beta2t * d.v[i] + (1.f - d.beta2t) * (g * g + k.eps1);
      const float u = update_at(d, i, rc, g);
      uu += u * u;
      pp += d.param[i] * d.param[i];
    }
    uu = gpu::block_sum<kThreads>(uu);
    __syncthreads();
    pp = gpu::block_sum<kThreads>(pp);
    if (threadIdx.x == 0) partials[2 * c] = uu, partials[2 * c + 1] = pp;
    __syncthreads();
  }
}

// 6. Launch: grid_for(num_tensors, 1) x 256. bytes = 8 chunks; flops = 2 chunks.
__global__ void adafactor_finalize_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt, gpu::AdafactorConsts k,
                                          const float* __restrict__ partials) {
  for (int j = blockIdx.x; j < nt; j += gridDim.x) {
    const gpu::AdafactorTensor& d = t[j];
    const int64_t chunks = (d.n + gpu::kMultiTensorChunk - 1) / gpu::kMultiTensorChunk;
    float uu = 0.f, pp = 0.f;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      uu += partials[2 * (d.chunk_begin + c)];
      pp += partials[2 * (d.chunk_begin + c) + 1];
    }
    uu = gpu::block_sum<kThreads>(uu);
    __syncthreads();
    pp = gpu::block_sum<kThreads>(pp);
    if (threadIdx.x == 0) {
      const float rms_p = sqrtf(pp / float(d.n)), rms_u = sqrtf(uu / float(d.n));
      d.stats[d.batch] = d.scale_parameter ? fmaxf(k.eps2, rms_p) * d.rel_lr : d.rel_lr;
      d.stats[d.batch + 1] = fmaxf(1.f, rms_u / k.clip);
    }
    __syncthreads();
  }
}

// 7. Launch: grid_for(num_chunks, 1) x 256. bytes = 12 n (+ 8 n with beta1, + 4 n for v); flops ~ 10 n.
__global__ void adafactor_update_kernel(const gpu::AdafactorTensor* __restrict__ t, int nt, int64_t num_chunks,
                                        gpu::AdafactorConsts k, const float* __restrict__ gs) {
  for (int64_t c = blockIdx.x; c < num_chunks; c += gridDim.x) {
    const gpu::AdafactorTensor& d = t[tensor_of<&gpu::AdafactorTensor::chunk_begin>(t, nt, c)];
    const int64_t begin = (c - d.chunk_begin) * gpu::kMultiTensorChunk;
    const int64_t end = begin + gpu::kMultiTensorChunk < d.n ? begin + gpu::kMultiTensorChunk : d.n;
    const float lr = d.stats[d.batch], divisor = d.stats[d.batch + 1], wd = d.weight_decay * lr;
    RowCol rc(d, begin + threadIdx.x);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x, rc.advance(d, blockDim.x)) {
      float u = update_at(d, i, rc, grad_at(d, i, gs)) / divisor * lr;
      if (d.m) {
        d.m[i] = k.beta1 * d.m[i] + (1.f - k.beta1) * u;
        u = d.m[i];
      }
      const float p = d.param[i];
      d.param[i] = (p - wd * p) - u;
    }
  }
}

void adafactor_multi_tensor(const gpu::AdafactorTensor* d_tensors, int num_tensors, int64_t num_chunks,
                            int64_t num_rows, int64_t num_tiles, int64_t num_parts, gpu::AdafactorConsts k,
                            float* d_partials, const float* grad_scale, void* stream) {
  if (num_tensors == 0 || num_chunks == 0) return;
  static_assert(gpu::kAdafactorTile == kThreads, "a thread a column of a tile");
  const cudaStream_t s = as_stream(stream);
  float* const col_parts = d_partials + 2 * num_chunks;  // after the chunks' (gpu::adafactor_scratch)
  if (num_rows > 0) {
    LAUNCH_KERNEL(adafactor_rows_kernel, grid_for(num_rows, 1), kThreads, 0, s, d_tensors, num_tensors, num_rows, k,
                  grad_scale);
    LAUNCH_KERNEL(adafactor_col_parts_kernel, grid_for(num_parts, 1), kThreads, 0, s, d_tensors, num_tensors, num_parts,
                  k, col_parts, grad_scale);
    LAUNCH_KERNEL(adafactor_cols_kernel, grid_for(num_tiles, 1), kThreads, 0, s, d_tensors, num_tensors, num_tiles,
                  col_parts);
    LAUNCH_KERNEL(adafactor_row_mean_kernel, grid_for(num_tensors, 1), kThreads, 0, s, d_tensors, num_tensors);
  }
  LAUNCH_KERNEL(adafactor_partials_kernel, grid_for(num_chunks, 1), kThreads, 0, s, d_tensors, num_tensors, num_chunks,
                k, d_partials, grad_scale);
  LAUNCH_KERNEL(adafactor_finalize_kernel, grid_for(num_tensors, 1), kThreads, 0, s, d_tensors, num_tensors, k,
                d_partials);
  LAUNCH_KERNEL(adafactor_update_kernel, grid_for(num_chunks, 1), kThreads, 0, s, d_tensors, num_tensors, num_chunks, k,
                grad_scale);
}

}  // namespace eng::ENGINE_GPU_NS
