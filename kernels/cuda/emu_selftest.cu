// A small kernel that proves kernels/cuda/portable.cuh both ways: nvcc
// compiles this file whenever the CUDA device is built (target
// engine_emu_nvcc_selftest), and tests/emu/test_emu_selftest.cpp compiles the
// very same source with g++ and runs it under the emulator. It touches each
// part of the portability layer once: static and dynamic shared memory,
// __syncthreads, both shuffle flavours, atomicAdd, bf16 loads with fp32 math,
// and LAUNCH_KERNEL.
#include <algorithm>

#include "kernels/cuda/portable.cuh"

namespace eng::emu_selftest {

// *out += sum(in[0..n)), accumulated in fp32 whatever T is (float, bf16, half).
// Launch: any grid; blockDim = (multiple of 32, <= 1024, 1, 1); dynamic shared
// memory = blockDim.x floats. *out must be zeroed by the caller.
// bytes = n * sizeof(T) + 4 * gridDim.x (one atomic per block), flops = n.
template <typename T>
__global__ void sum_kernel(const T* in, float* out, int n) {
  DYNAMIC_SMEM(float, smem_partial);
  __shared__ float smem_warp[32];
  const int tid = int(threadIdx.x), lane = tid % warpSize, warp = tid / warpSize;
  float v = 0.f;
  for (int i = int(blockIdx.x * blockDim.x) + tid; i < n; i += int(gridDim.x * blockDim.x)) v += float(in[i]);
  // A round trip through dynamic shared memory: thread t reads its neighbour's
  // partial, so the barrier is load-bearing (and the sum unchanged).
  smem_partial[tid] = v;
  __syncthreads();
  v = smem_partial[(tid + 1) % int(blockDim.x)];
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) smem_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {  // warp-only code between block barriers: the emulator must not need the other warps here
    v = lane < int(blockDim.x) / warpSize ? smem_warp[lane] : 0.f;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) atomicAdd(out, v);
  }
}

template <typename T>
void sum(const T* d_in, float* d_out, int n, cudaStream_t stream) {
  const int block = 128;
  const int grid = std::max(1, std::min((n + block - 1) / block, 64));
  LAUNCH_KERNEL(sum_kernel<T>, grid, block, block * sizeof(float), stream, d_in, d_out, n);
}

template void sum<float>(const float*, float*, int, cudaStream_t);
#if defined(__CUDACC__) || defined(ENGINE_EMU_HAVE_CUDA_HEADERS)
template void sum<__nv_bfloat16>(const __nv_bfloat16*, float*, int, cudaStream_t);
#endif

}  // namespace eng::emu_selftest
