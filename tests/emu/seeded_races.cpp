// Deliberately broken kernels for the emulator's race check (docs/emulator.md,
// "Race check"), each next to its corrected twin. `emu_seeded_races CASE`
// launches one of them; tests/cli/test_emu_race.sh runs every CASE in the
// ThreadSanitizer build and checks that each broken kernel is reported as a
// data race naming the kernel and the source lines of both accesses, which
// are marked below with a `race:` comment, and that every twin runs clean.
// Memory is plain host memory: under the emulator that is device memory.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/portable.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace {

constexpr int kThreads = 64;

// 1. A thread reads the shared-memory slot its neighbour writes, with no
//    barrier between the write and the read.
__global__ void neighbour_smem_kernel(float* out, bool with_barrier) {
  __shared__ float tile[kThreads];
  const int t = int(threadIdx.x);
  tile[t] = float(t);  // race: neighbour_smem
  if (with_barrier) __syncthreads();
  out[t] = tile[(t + 1) % kThreads];  // race: neighbour_smem
}

// 2. A tree reduction whose levels are not separated by barriers: a thread
//    reads a partial sum that another thread of the level below is writing.
__global__ void tree_sum_kernel(const float* in, float* out, bool with_barrier) {
  __shared__ float partial[kThreads];
  const int t = int(threadIdx.x);
  partial[t] = in[t];
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];  // race: tree_sum
    if (with_barrier) __syncthreads();
  }
  if (t == 0) out[0] = partial[0];
}

// 3. Every block stores its result to the same global element: plain stores
//    from different blocks, where an atomic was meant.
__global__ void same_element_kernel(float* out, bool atomic) {
  if (threadIdx.x != 0) return;
  if (atomic)
    atomicAdd(out, float(blockIdx.x));
  else
    out[0] += float(blockIdx.x);  // race: same_element
}

// 4. A block reads what another block of the same launch writes: blocks run
//    in any order, so only a later launch may read what a block wrote.
enum class Phase : int { write_and_read, write, read };
__global__ void next_block_kernel(float* data, float* out, Phase phase) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (phase != Phase::read) data[i] = float(i);  // race: next_block
  if (phase == Phase::write || threadIdx.x != 0) return;
  const unsigned next = (blockIdx.x + 1) % gridDim.x;
  out[blockIdx.x] = data[next * blockDim.x];  // race: next_block
}

// 5. A warp collective whose mask leaves out the lane that wrote the value
//    read: __syncwarp(half) orders only the caller's half-warp.
__global__ void half_warp_kernel(float* out, bool full_mask) {
  __shared__ float lane_value[32];
  const unsigned lane = threadIdx.x;
  lane_value[lane] = float(lane);  // race: half_warp
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  __syncwarp(full_mask ? 0xffffffffu : half);
  out[lane] = lane_value[lane ^ 16];  // race: half_warp
}

// 6. cp.async: a thread reads the element its neighbour copied after the
//    barrier, but the neighbour waits for its copy only after the barrier,
//    so the copy may land while the read happens (kernels/emu/async.cpp).
__global__ void cp_async_late_wait_kernel(const float* in, float* out, bool wait_first) {
  __shared__ __align__(16) float tile[kThreads];
  const int t = int(threadIdx.x);
  eng::tc::cp_async_ca<4>(eng::tc::smem_addr(&tile[t]), in + t);
  eng::tc::cp_async_commit();
  if (wait_first) eng::tc::cp_async_wait_all();
  __syncthreads();
  out[t] = tile[(t + 1) % kThreads];              // race: cp_async_late_wait
  if (!wait_first) eng::tc::cp_async_wait_all();  // race: cp_async_late_wait
}

// The launches. `fixed` picks the corrected twin.
void run(const std::string& name, bool fixed) {
  std::vector<float> a(4 * kThreads, 1.f), b(4 * kThreads, 0.f);
  if (name == "neighbour_smem") {
    LAUNCH_KERNEL(neighbour_smem_kernel, 1, kThreads, 0, nullptr, b.data(), fixed);
  } else if (name == "tree_sum") {
    LAUNCH_KERNEL(tree_sum_kernel, 1, kThreads, 0, nullptr, a.data(), b.data(), fixed);
  } else if (name == "same_element") {
    LAUNCH_KERNEL(same_element_kernel, 4, 32, 0, nullptr, b.data(), fixed);
  } else if (name == "next_block") {
    if (!fixed) {
      LAUNCH_KERNEL(next_block_kernel, 4, kThreads, 0, nullptr, a.data(), b.data(), Phase::write_and_read);
    } else {  // write in one launch, read in the next
      LAUNCH_KERNEL(next_block_kernel, 4, kThreads, 0, nullptr, a.data(), b.data(), Phase::write);
      LAUNCH_KERNEL(next_block_kernel, 4, kThreads, 0, nullptr, a.data(), b.data(), Phase::read);
    }
  } else if (name == "half_warp") {
    LAUNCH_KERNEL(half_warp_kernel, 1, 32, 0, nullptr, b.data(), fixed);
  } else if (name == "cp_async_late_wait") {
    LAUNCH_KERNEL(cp_async_late_wait_kernel, 1, kThreads, 0, nullptr, a.data(), b.data(), fixed);
  } else {
    std::fprintf(stderr, "emu_seeded_races: unknown case '%s'\n", name.c_str());
    std::exit(2);
  }
  // What the kernel computed, to compare across schedules (test_emu_race.sh).
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const float v : b) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    hash = (hash ^ bits) * 0x100000001b3ull;
  }
  std::printf("%s%s: out[0..3] = %g %g %g %g, hash %016llx\n", name.c_str(), fixed ? " (fixed)" : "", double(b[0]),
              double(b[1]), double(b[2]), double(b[3]), static_cast<unsigned long long>(hash));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::strcmp(argv[2], "fixed") == 0)) {
    std::fprintf(stderr,
                 "usage: emu_seeded_races CASE [fixed]\n"
                 "CASE: neighbour_smem, tree_sum, same_element, next_block, half_warp, cp_async_late_wait\n");
    return 2;
  }
  try {
    run(argv[1], argc == 3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "emu_seeded_races: %s\n", e.what());
    return 1;
  }
  return 0;
}
