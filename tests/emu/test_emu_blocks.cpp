// Block-level behaviour of the emulator: block reductions through shared
// memory (a barrier-per-step tree) and through warp shuffles (the
// `if (warp == 0) ...; __syncthreads();` shape), template kernels with static
// __shared__, dynamic shared memory, __syncthreads_count/and/or,
// multi-dimensional grid and block indices, and grids with more blocks than
// threads. References are plain host loops in double; sums of integers are
// exact in float here, so most checks are equality.
#include "tests/test_util.h"
// Kernel sources come after the test headers: they define the CUDA keywords.
#include "kernels/cuda/portable.cuh"

namespace {

// out[block] = sum of in[block * blockDim.x + t]; blockDim.x a power of two <= 256.
template <typename T>
__global__ void tree_reduce_kernel(const T* in, T* out) {
  __shared__ T smem[256];
  const unsigned t = threadIdx.x;
  smem[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) smem[t] += smem[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = smem[0];
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// out[block] = sum over the block's n-element slice; any blockDim.x that is a
// multiple of 32. The second stage runs on warp 0 only, between two block
// barriers: a block-wide rendezvous for shuffles would deadlock here.
__global__ void shuffle_reduce_kernel(const float* in, int n, float* out) {
  __shared__ float smem_warp[32];
  const int t = int(threadIdx.x), lane = t % 32, warp = t / 32, nwarps = int(blockDim.x) / 32;
  float v = 0;
  for (int i = t; i < n; i += int(blockDim.x)) v += in[blockIdx.x * unsigned(n) + unsigned(i)];
  v = warp_sum(v);
  if (lane == 0) smem_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < nwarps ? smem_warp[lane] : 0.f);
    if (lane == 0) smem_warp[0] = v;
  }
  __syncthreads();
  out[blockIdx.x * blockDim.x + unsigned(t)] = smem_warp[0];  // every thread sees the block's total
}

// Reverses each block's slice through dynamic shared memory; a second
// DYNAMIC_SMEM view of the same bytes checks that both alias, as in CUDA.
__global__ void reverse_kernel(const float* in, float* out, unsigned* bits_out) {
  DYNAMIC_SMEM(float, smem);
  DYNAMIC_SMEM(unsigned, smem_bits);
  const unsigned t = threadIdx.x, n = blockDim.x, base = blockIdx.x * n;
  smem[t] = in[base + t];
  __syncthreads();
  out[base + t] = smem[n - 1 - t];
  bits_out[base + t] = smem_bits[t];
}

__global__ void barrier_reductions_kernel(int* out) {
  const int t = int(threadIdx.x);
  out[0 * blockDim.x + unsigned(t)] = __syncthreads_count(t % 3 == 0);
  out[1 * blockDim.x + unsigned(t)] = __syncthreads_and(t < 1000);
  out[2 * blockDim.x + unsigned(t)] = __syncthreads_and(t != 5);
  out[3 * blockDim.x + unsigned(t)] = __syncthreads_or(t == 17);
  out[4 * blockDim.x + unsigned(t)] = __syncthreads_or(0);
}

// Every thread writes its coordinates at its global linear index.
__global__ void index_kernel(int* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int* o = out + 8 * (block * nthreads + thread);
  const unsigned v[8] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x,
                         blockIdx.y,  blockIdx.z,  blockDim.z,  gridDim.y};
  for (int i = 0; i < 8; ++i) o[i] = int(v[i]);
}

// Grid-stride loop: y[i] = 2 x[i] + 1 with far more elements than threads.
__global__ void grid_stride_kernel(const float* x, float* y, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x)) y[i] = 2 * x[i] + 1;
}

}  // namespace

TEST_CASE("emu block reduction through static shared memory (template kernels)", "[emu]") {
  const int blocks = 5, threads = 128;
  std::vector<float> in(blocks * threads);
  std::vector<double> in_d(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(int(i * 37 % 101) - 50), in_d[i] = in[i];
  std::vector<float> out(blocks);
  std::vector<double> out_d(blocks);
  LAUNCH_KERNEL(tree_reduce_kernel<float>, blocks, threads, 0, nullptr, in.data(), out.data());
  LAUNCH_KERNEL(tree_reduce_kernel<double>, blocks, threads, 0, nullptr, in_d.data(), out_d.data());
  for (int b = 0; b < blocks; ++b) {
    double ref = 0;
    for (int t = 0; t < threads; ++t) ref += in[size_t(b * threads + t)];
    CHECK(out[size_t(b)] == float(ref));
    CHECK(out_d[size_t(b)] == ref);
  }
}

TEST_CASE("emu block reduction through warp shuffles, second stage on warp 0 only", "[emu]") {
  for (const int threads : {32, 96, 256}) {
    const int blocks = 3, n = 1000;
    std::vector<float> in(size_t(blocks * n));
    for (size_t i = 0; i < in.size(); ++i) in[i] = float(i % 7) - 3;
    std::vector<float> out(size_t(blocks * threads), -1);
    LAUNCH_KERNEL(shuffle_reduce_kernel, blocks, threads, 0, nullptr, in.data(), n, out.data());
    for (int b = 0; b < blocks; ++b) {
      double ref = 0;
      for (int i = 0; i < n; ++i) ref += in[size_t(b * n + i)];
      for (int t = 0; t < threads; ++t) {
        INFO("threads " << threads << " block " << b << " thread " << t);
        CHECK(out[size_t(b * threads + t)] == float(ref));
      }
    }
  }
}

TEST_CASE("emu dynamic shared memory: sized by the launch, aliased by every DYNAMIC_SMEM", "[emu]") {
  const int blocks = 3, threads = 50;
  std::vector<float> in(blocks * threads), out(in.size());
  std::vector<unsigned> bits(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) + 0.5f;
  LAUNCH_KERNEL(reverse_kernel, blocks, threads, threads * sizeof(float), nullptr, in.data(), out.data(), bits.data());
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) {
      const float v = in[size_t(b * threads + threads - 1 - t)];
      CHECK(out[size_t(b * threads + t)] == v);
      unsigned u;
      std::memcpy(&u, &in[size_t(b * threads + t)], 4);
      CHECK(bits[size_t(b * threads + t)] == u);
    }
}

TEST_CASE("emu __syncthreads_count/and/or reduce a predicate over the block", "[emu]") {
  const unsigned threads = 70;
  std::vector<int> out(5 * threads, -1);
  LAUNCH_KERNEL(barrier_reductions_kernel, 1, threads, 0, nullptr, out.data());
  const int want[5] = {24, 1, 0, 1, 0};  // 70 threads: t % 3 == 0 for 24 of them
  for (int k = 0; k < 5; ++k)
    for (unsigned t = 0; t < threads; ++t) CHECK(out[k * threads + t] == want[k]);
}

TEST_CASE("emu multi-dimensional grid and block indices", "[emu]") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const unsigned nblocks = 12, nthreads = 24;
  std::vector<int> out(8 * nblocks * nthreads, -1);
  LAUNCH_KERNEL(index_kernel, grid, block, 0, nullptr, out.data());
  // The host enumerates in its own order: z outermost, x fastest.
  size_t i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx, i += 8) {
              const int want[8] = {int(tx), int(ty), int(tz), int(bx), int(by), int(bz), 2, 2};
              for (int k = 0; k < 8; ++k) CHECK(out[i + size_t(k)] == want[k]);
            }
}

TEST_CASE("emu grids with more blocks than threads, and more elements than threads", "[emu]") {
  const int n = 3001;
  std::vector<float> x(n), y(n, 0);
  for (int i = 0; i < n; ++i) x[size_t(i)] = float(i);
  LAUNCH_KERNEL(grid_stride_kernel, 100, 8, 0, nullptr, x.data(), y.data(), n);
  for (int i = 0; i < n; ++i) CHECK(y[size_t(i)] == 2.f * float(i) + 1);
  // One thread per block, many blocks, still a barrier per block.
  std::vector<float> in(300), out(300);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  LAUNCH_KERNEL(tree_reduce_kernel<float>, 300, 1, 0, nullptr, in.data(), out.data());
  CHECK(out == in);
}
