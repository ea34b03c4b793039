// Deliberately broken kernels: the emulator must report each with the
// file:line of the offending barrier or collective, and stay usable after.
// The k...Line constants are written just above each kernel, relative to
// __LINE__, so they name the exact line of the broken call.
// Also: reads of unwritten shared memory give NaN (static and dynamic, per
// block), exceptions thrown by kernel code come out of the launch (with
// their type), and misuse (bad launch shapes, shuffle widths, masks, nested
// launches, intrinsics outside a kernel) is a clear error.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tests/test_util.h"
// Kernel sources come after the test headers: they define the CUDA keywords.
#include "kernels/cuda/portable.cuh"

using Catch::Matchers::Contains;

namespace {

std::string here(int line) { return eng::cat("test_emu_errors.cpp:", line); }

// Which thread a report names depends on the order the threads ran in; the
// exact names are pinned under the default schedule (scripts/emu_schedules.sh
// reruns these tests under the others, where only the order-free part holds).
bool forward_schedule() {
  const char* s = std::getenv("ENGINE_EMU_SCHEDULE");
  return !s || !*s || std::string(s) == "forward";
}

constexpr int kDivergentA = __LINE__ + 3, kDivergentB = __LINE__ + 5;
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}
void launch_divergent(int* out) { LAUNCH_KERNEL(divergent_barrier_kernel, 1, 32, 0, nullptr, out); }
constexpr int kDivergentLaunch = __LINE__ - 1;

constexpr int kLateExit = __LINE__ + 4;
__global__ void late_exit_kernel(int* out) {  // threads 16.. return after 0..15 wait
  std::vector<int> local(100, 1);             // freed when the waiters are unwound (LeakSanitizer checks)
  if (threadIdx.x >= 16) return;
  __syncthreads();
  out[threadIdx.x] = local[3];
}

constexpr int kEarlyExit = __LINE__ + 3;
__global__ void early_exit_kernel(int* out) {  // threads 0..15 return before 16.. arrive
  if (threadIdx.x < 16) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

constexpr int kShuffle = __LINE__ + 4, kBallot = __LINE__ + 6;
__global__ void mismatched_warp_kernel(int* out) {
  int v = int(threadIdx.x);
  if (threadIdx.x % 2 == 0) {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  } else {
    v = int(__ballot_sync(0xffffffffu, v > 3));
  }
  out[threadIdx.x] = v;
}

constexpr int kDeadBarrier = __LINE__ + 4, kDeadShuffle = __LINE__ + 6;
__global__ void warp_vs_barrier_kernel(int* out) {
  int v = int(threadIdx.x);
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  }
  out[threadIdx.x] = v;
}

// Lanes 0..30 wait in the shuffle before lane 31 (scheduled last) reaches the
// barrier: found when no fiber can run, not at an arrival.
constexpr int kLateBarrier = __LINE__ + 4, kLateShuffle = __LINE__ + 6;
__global__ void late_barrier_kernel(int* out) {
  int v = int(threadIdx.x);
  if (threadIdx.x == 31) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  }
  out[threadIdx.x] = v;
}

// Block 0 writes all of its shared memory, block 1 only the first half: block
// 1 must read NaN in the second half, not block 0's leftovers.
__global__ void unwritten_smem_kernel(float* out_static, float* out_dynamic) {
  __shared__ float smem[32];
  DYNAMIC_SMEM(float, dyn);
  const unsigned t = threadIdx.x;
  if (blockIdx.x == 0 || t < 16) smem[t] = float(t), dyn[t] = float(t);
  __syncthreads();
  out_static[blockIdx.x * 32 + t] = smem[t];
  out_dynamic[blockIdx.x * 32 + t] = dyn[t];
}

__global__ void throwing_kernel(int bad_thread, int* out) {
  std::vector<int> local(100, int(threadIdx.x));  // freed when the launch is torn down
  if (int(threadIdx.x) == bad_thread) ENGINE_FAIL("thread ", threadIdx.x, " gives up");
  if (int(threadIdx.x) == -bad_thread) throw std::out_of_range("kernel-made out_of_range");
  __syncthreads();
  out[threadIdx.x] = local[5];
}

constexpr int kBadWidth = __LINE__ + 1;
__global__ void bad_width_kernel(int* out) { out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1, 12); }

constexpr int kBadMask = __LINE__ + 2;
__global__ void bad_mask_kernel(unsigned* out) {
  out[threadIdx.x] = __ballot_sync(1u << (threadIdx.x / 2), 1);  // lane 1's mask names lane 0 only
}

__global__ void child_kernel(int* out) { out[0] = 1; }
__global__ void parent_kernel(int* out) { LAUNCH_KERNEL(child_kernel, 1, 1, 0, nullptr, out); }

__global__ void fine_kernel(int* out) {
  __syncthreads();
  out[threadIdx.x] = int(__shfl_xor_sync(0xffffffffu, threadIdx.x, 1));
}
// Two kernels of one signature, as the tensor-core attention's variants are.
__global__ void big_smem_kernel(float* out) {
  DYNAMIC_SMEM(float, dyn);
  dyn[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = dyn[31 - threadIdx.x];
}
__global__ void big_smem_twin_kernel(float* out) {
  DYNAMIC_SMEM(float, dyn);
  dyn[threadIdx.x] = 1.f;
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x];
}

void check_still_works() {
  std::vector<int> out(64, -1);
  LAUNCH_KERNEL(fine_kernel, 1, 64, 0, nullptr, out.data());
  for (int t = 0; t < 64; ++t) CHECK(out[size_t(t)] == (t ^ 1));
}

}  // namespace

TEST_CASE("emu reports a divergent __syncthreads with both call sites and the launch", "[emu]") {
  std::vector<int> out(32);
  CHECK_THROWS_WITH(launch_divergent(out.data()), Contains("divergent __syncthreads()") &&
                                                      Contains(here(kDivergentA)) && Contains(here(kDivergentB)) &&
                                                      Contains("launched at") && Contains(here(kDivergentLaunch)));
  check_still_works();
}

TEST_CASE("emu reports threads that exit while others wait at a barrier, in either order", "[emu]") {
  std::vector<int> out(32);
  if (forward_schedule()) {
    CHECK_THROWS_WITH(LAUNCH_KERNEL(late_exit_kernel, 1, 32, 0, nullptr, out.data()),
                      Contains(here(kLateExit)) && Contains("thread (16,0,0) of block (0,0,0) returned while 16"));
    CHECK_THROWS_WITH(LAUNCH_KERNEL(early_exit_kernel, 2, 32, 0, nullptr, out.data()),
                      Contains(here(kEarlyExit)) && Contains("thread (0,0,0) of block (0,0,0) has already returned"));
  } else {
    // (Catch2's composed matchers keep references: each is written out whole.)
    CHECK_THROWS_WITH(LAUNCH_KERNEL(late_exit_kernel, 1, 32, 0, nullptr, out.data()),
                      Contains(here(kLateExit)) && (Contains("of the block's 32 threads wait here") ||
                                                    Contains("has already returned without reaching it")));
    CHECK_THROWS_WITH(LAUNCH_KERNEL(early_exit_kernel, 2, 32, 0, nullptr, out.data()),
                      Contains(here(kEarlyExit)) && (Contains("of the block's 32 threads wait here") ||
                                                     Contains("has already returned without reaching it")));
  }
  check_still_works();
}

TEST_CASE("emu reports mismatched warp collectives and warp/barrier deadlocks", "[emu]") {
  std::vector<int> out(64);
  CHECK_THROWS_WITH(LAUNCH_KERNEL(mismatched_warp_kernel, 1, 64, 0, nullptr, out.data()),
                    Contains("mismatched warp collectives") && Contains(here(kShuffle)) && Contains(here(kBallot)) &&
                        Contains("__shfl_xor_sync") && Contains("__ballot_sync"));
  CHECK_THROWS_WITH(LAUNCH_KERNEL(warp_vs_barrier_kernel, 1, 32, 0, nullptr, out.data()),
                    Contains("deadlock") && Contains(here(kDeadShuffle)) && Contains(here(kDeadBarrier)));
  CHECK_THROWS_WITH(
      LAUNCH_KERNEL(late_barrier_kernel, 1, 32, 0, nullptr, out.data()),
      Contains("deadlock") && Contains(here(kLateShuffle)) && Contains(here(kLateBarrier)) && Contains("for lane 31"));
  check_still_works();
}

TEST_CASE("emu poisons shared memory per block: unwritten reads are NaN", "[emu]") {
  std::vector<float> st(64, 0), dyn(64, 0);
  LAUNCH_KERNEL(unwritten_smem_kernel, 2, 32, 32 * sizeof(float), nullptr, st.data(), dyn.data());
  for (int i = 0; i < 64; ++i) {
    INFO("block " << i / 32 << " thread " << i % 32);
    if (i < 48) {
      CHECK(st[size_t(i)] == float(i % 32));
      CHECK(dyn[size_t(i)] == float(i % 32));
    } else {
      CHECK(std::isnan(st[size_t(i)]));
      CHECK(std::isnan(dyn[size_t(i)]));
    }
  }
}

TEST_CASE("emu carries exceptions out of a kernel, with their type and the faulting thread", "[emu]") {
  std::vector<int> out(64);
  CHECK_THROWS_WITH(
      LAUNCH_KERNEL(throwing_kernel, 1, 64, 0, nullptr, 37, out.data()),
      Contains("thread 37 gives up") && Contains("thread (37,0,0) of block (0,0,0)") && Contains("throwing_kernel"));
  CHECK_THROWS_AS(LAUNCH_KERNEL(throwing_kernel, 1, 64, 0, nullptr, -5, out.data()), std::out_of_range);
  check_still_works();
}

TEST_CASE("emu rejects misuse: launch shapes, shuffle widths, masks, nesting, intrinsics outside kernels", "[emu]") {
  std::vector<int> out(64);
  std::vector<unsigned> uout(64);
  const int bad_launch = __LINE__ + 1;
  CHECK_THROWS_WITH(LAUNCH_KERNEL(fine_kernel, 1, 2048, 0, nullptr, out.data()),
                    Contains(here(bad_launch)) && Contains("at most 1024 threads"));
  CHECK_THROWS_WITH(LAUNCH_KERNEL(fine_kernel, dim3(1, 0, 1), 32, 0, nullptr, out.data()), Contains("at least 1"));
  CHECK_THROWS_WITH(LAUNCH_KERNEL(bad_width_kernel, 1, 32, 0, nullptr, out.data()),
                    Contains(here(kBadWidth)) && Contains("width 12"));
  CHECK_THROWS_WITH(LAUNCH_KERNEL(bad_mask_kernel, 1, 32, 0, nullptr, uout.data()),
                    Contains(here(kBadMask)) &&
                        Contains(forward_schedule() ? "does not include the calling lane 1" : "does not include"));
  CHECK_THROWS_WITH(LAUNCH_KERNEL(parent_kernel, 1, 1, 0, nullptr, out.data()), Contains("dynamic parallelism"));
  CHECK_THROWS_WITH(__syncthreads(), Contains("outside an emulated kernel"));
  check_still_works();
}

// A GPU refuses a launch asking for more than 48 KiB of dynamic shared
// memory unless cudaFuncSetAttribute allowed that kernel as much ("invalid
// argument"); the H200 found a kernel allowed in place of its twin.
TEST_CASE("emu refuses over 48 KiB of dynamic shared memory until that kernel is allowed it", "[emu]") {
  std::vector<float> out(32);
  constexpr size_t kBytes = 64 * 1024;
  LAUNCH_KERNEL(big_smem_kernel, 1, 32, 48 * 1024, nullptr, out.data());  // 48 KiB: no attribute needed
  CHECK(out[0] == 31.f);
  CHECK_THROWS_WITH(LAUNCH_KERNEL(big_smem_kernel, 1, 32, kBytes, nullptr, out.data()),
                    Contains("65536 bytes of dynamic shared memory") &&
                        Contains("cudaFuncAttributeMaxDynamicSharedMemorySize") && Contains("invalid argument"));
  emu::set_max_dynamic_smem(reinterpret_cast<std::uintptr_t>(&big_smem_kernel), kBytes);
  LAUNCH_KERNEL(big_smem_kernel, 1, 32, kBytes, nullptr, out.data());
  CHECK(out[31] == 0.f);
  CHECK_THROWS_WITH(LAUNCH_KERNEL(big_smem_kernel, 1, 32, kBytes + 4, nullptr, out.data()), Contains("allowed 65536"));
  // The attribute is the kernel's own: its twin of the same signature is still refused.
  CHECK_THROWS_WITH(LAUNCH_KERNEL(big_smem_twin_kernel, 1, 32, kBytes, nullptr, out.data()), Contains("allowed 49152"));
  check_still_works();
}

TEST_CASE("emu refuses a bad ENGINE_EMU_SCHEDULE with the variable and the forms it takes", "[emu]") {
  const char* was = std::getenv("ENGINE_EMU_SCHEDULE");
  const std::string saved = was ? was : "";
  std::vector<int> out(64);
  for (const char* bad : {"sideways", "random", "random:", "random:x1", "random:1x"}) {
    INFO(bad);
    setenv("ENGINE_EMU_SCHEDULE", bad, 1);
    CHECK_THROWS_WITH(
        LAUNCH_KERNEL(fine_kernel, 1, 32, 0, nullptr, out.data()),
        Contains(eng::cat("ENGINE_EMU_SCHEDULE='", bad, "'")) && Contains("expected forward, reverse or random:SEED"));
  }
  if (was)
    setenv("ENGINE_EMU_SCHEDULE", saved.c_str(), 1);
  else
    unsetenv("ENGINE_EMU_SCHEDULE");
  check_still_works();
}
