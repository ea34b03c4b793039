// The emulator's tensor-core instructions (kernels/emu/tensor_core.h) where a
// GPU gives no answer to compare with: misuse and missing waits. Each seeded
// bug must be an error naming the instruction, the call site and the lane, or
// (a read before its cp.async wait) must show the poison the emulator leaves
// in the destination until the wait. The values of correct use are checked
// lane by lane in tests/kernels/test_tensor_core_emu.cpp.
#include <string>
#include <vector>

#include "tests/test_util.h"
// Kernel sources come after the test headers: they define the CUDA keywords.
#include "kernels/cuda/tensor_core.cuh"

using Catch::Matchers::Contains;

namespace {

// The error a launch throws, or "" when it runs.
template <typename F>
std::string error_of(F&& launch) {
  try {
    launch();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

enum class Mma : int { converged, divergent, lane_exits };
constexpr int kMmaHigh = __LINE__ + 9, kMmaLow = __LINE__ + 11;  // the two mma.sync lines below
__global__ void mma_kernel(float* out, Mma how) {
  const int lane = int(threadIdx.x % 32);
  const uint32_t a[4] = {0x3f803f80u, 0x3f803f80u, 0x3f803f80u, 0x3f803f80u};  // bf16 ones
  const uint32_t b[2] = {0x3f803f80u, 0x3f803f80u};
  const float c[4] = {0.f, 0.f, 0.f, 0.f};
  float d[4];
  if (how == Mma::lane_exits && lane == 5) return;
  if (how == Mma::divergent && lane >= 16)
    eng::tc::mma_m16n8k16_bf16(d, a, b, c);  // the other half of the warp: another instruction
  else
    eng::tc::mma_m16n8k16_bf16(d, a, b, c);
  out[threadIdx.x] = d[0];
}

enum class Ld : int { aligned, misaligned, global, past_end, cvta_static };
__global__ void ldmatrix_kernel(const uint16_t* global, uint32_t* out, Ld how) {
  DYNAMIC_SMEM(uint16_t, smem);  // 16 rows of 8
  __shared__ __align__(16) uint16_t fixed[8 * 8];
  const int lane = int(threadIdx.x);
  for (int i = lane; i < 16 * 8; i += 32) smem[i] = uint16_t(i);
  for (int i = lane; i < 8 * 8; i += 32) fixed[i] = uint16_t(100 + i);
  __syncthreads();
  uint32_t addr = eng::tc::smem_addr(smem + (lane % 8) * 8);
  if (how == Ld::misaligned && lane == 3) addr += 8;
  if (how == Ld::global && lane == 6) addr = eng::tc::smem_addr(global);
  if (how == Ld::past_end && lane == 7) addr = eng::tc::smem_addr(smem) + 16 * 16;
  if (how == Ld::cvta_static) addr = uint32_t(__cvta_generic_to_shared(fixed + (lane % 8) * 8));
  uint32_t r[1];
  eng::tc::ldmatrix_x1(r, addr);
  out[lane] = r[0];
}

// Two groups: chunk 0 in the first, chunk 1 in the second; `waits` says how
// far the thread waits before reading both back.
enum class Wait : int { none, newest_pending, all };
__global__ void cp_async_kernel(const float* in, float* out, Wait waits) {
  __shared__ __align__(16) float stage[2][4];
  eng::tc::cp_async_ca<16>(eng::tc::smem_addr(stage[0]), in);
  eng::tc::cp_async_commit();
  eng::tc::cp_async_cg(eng::tc::smem_addr(stage[1]), in + 4, 8);  // 8 bytes read, 8 zero-filled
  eng::tc::cp_async_commit();
  if (waits == Wait::newest_pending) eng::tc::cp_async_wait_group<1>();
  if (waits == Wait::all) eng::tc::cp_async_wait_group<0>();
  for (int i = 0; i < 4; ++i) out[i] = stage[0][i], out[4 + i] = stage[1][i];
}

// A prefetch into the buffer the thread is about to read: the second copy
// (group 2) goes where the first (group 1) went, and wait_group 1 lands only
// the first. On a GPU the second may land before or during the read; the
// emulator keeps its destination poisoned, so the read is NaN, not the
// first copy's data by luck. With two buffers (`fixed`) the read is clean.
__global__ void cp_async_overwrite_kernel(const float* in, float* out, bool fixed) {
  __shared__ __align__(16) float stage[2][4];
  eng::tc::cp_async_ca<16>(eng::tc::smem_addr(stage[0]), in);
  eng::tc::cp_async_commit();
  eng::tc::cp_async_ca<16>(eng::tc::smem_addr(stage[fixed ? 1 : 0]), in + 4);
  eng::tc::cp_async_commit();
  eng::tc::cp_async_wait_group<1>();
  for (int i = 0; i < 4; ++i) out[i] = stage[0][i];
  eng::tc::cp_async_wait_all();
}

__global__ void cp_async_misuse_kernel(const float* in, int offset, int src_bytes) {
  __shared__ __align__(16) float stage[4];
  eng::tc::cp_async_ca<16>(eng::tc::smem_addr(stage), in + offset, src_bytes);
  eng::tc::cp_async_wait_all();
}

}  // namespace

TEST_CASE("emu tensor cores: mma.sync needs the whole warp at one instruction", "[emu]") {
  std::vector<float> out(64, -1.f);
  const auto run = [&](Mma how, int threads) {
    return error_of([&] { LAUNCH_KERNEL(mma_kernel, 1, threads, 0, nullptr, out.data(), how); });
  };
  CHECK(run(Mma::converged, 64).empty());
  CHECK(out[0] == 16.f);  // a row of ones times a column of ones, k = 16
  const std::string divergent = run(Mma::divergent, 32);
  CHECK_THAT(divergent, Contains("divergent warp in warp 0"));
  CHECK_THAT(divergent, Contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  CHECK_THAT(divergent, Contains(eng::cat("test_emu_tensor_core.cpp:", kMmaHigh)));  // both sites named
  CHECK_THAT(divergent, Contains(eng::cat("test_emu_tensor_core.cpp:", kMmaLow)));
  CHECK_THAT(divergent, Contains("kernel mma_kernel"));
  const std::string exits = run(Mma::lane_exits, 32);
  CHECK_THAT(exits, Contains("lane 5 (thread (5,0,0) of block (0,0,0)) has returned"));
  CHECK_THAT(exits, Contains("all 32 lanes"));
  const std::string partial = run(Mma::converged, 48);
  CHECK_THAT(partial, Contains("its warp has 16 threads"));
}

TEST_CASE("emu tensor cores: ldmatrix rows must be 16-byte aligned rows of the block's shared memory", "[emu]") {
  std::vector<uint16_t> global(64, 0);
  std::vector<uint32_t> out(32, 0);
  const auto run = [&](Ld how) {
    return error_of([&] { LAUNCH_KERNEL(ldmatrix_kernel, 1, 32, 16 * 16, nullptr, global.data(), out.data(), how); });
  };
  CHECK(run(Ld::aligned).empty());
  CHECK(out[5] == (uint32_t(1 * 8 + 2) | uint32_t(1 * 8 + 3) << 16));  // lane 5: row 1, columns 2 and 3
  CHECK(run(Ld::cvta_static).empty());  // static __shared__ through __cvta_generic_to_shared
  CHECK(out[5] == (uint32_t(100 + 1 * 8 + 2) | uint32_t(100 + 1 * 8 + 3) << 16));
  const std::string misaligned = run(Ld::misaligned);
  CHECK_THAT(misaligned, Contains("ldmatrix.sync.aligned.m8n8.x1.shared.b16"));
  CHECK_THAT(misaligned, Contains("(lane 3)"));
  CHECK_THAT(misaligned, Contains("is not 16-byte aligned"));
  const std::string global_ptr = run(Ld::global);
  CHECK_THAT(global_ptr, Contains("(lane 6)"));
  CHECK_THAT(global_ptr, Contains("is not in the block's shared memory"));
  const std::string past_end = run(Ld::past_end);
  CHECK_THAT(past_end, Contains("(lane 7)"));
  CHECK_THAT(past_end, Contains("is outside the block's shared memory"));
  CHECK_THAT(past_end, Contains("kernel ldmatrix_kernel"));
}

TEST_CASE("emu tensor cores: a cp.async lands at the wait that covers it, not before", "[emu]") {
  const std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(8, 0.f);
  const auto run = [&](Wait w) { LAUNCH_KERNEL(cp_async_kernel, 1, 1, 0, nullptr, in.data(), out.data(), w); };
  run(Wait::all);
  CHECK(out == std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0});  // the second copy read 8 bytes, zero-filled 8
  // wait_group 1: the first group only.
  run(Wait::newest_pending);
  CHECK(out[0] == 1.f);
  CHECK(out[3] == 4.f);
  for (int i = 4; i < 8; ++i) CHECK(std::isnan(out[size_t(i)]));  // the poison: the copy has not landed
  // A missing wait reads poison, not the data by luck.
  run(Wait::none);
  for (int i = 0; i < 8; ++i) CHECK(std::isnan(out[size_t(i)]));
}

TEST_CASE("emu tensor cores: a copy still pending after a wait keeps its destination poisoned", "[emu]") {
  const std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(4, 0.f);
  LAUNCH_KERNEL(cp_async_overwrite_kernel, 1, 1, 0, nullptr, in.data(), out.data(), false);
  for (int i = 0; i < 4; ++i) CHECK(std::isnan(out[size_t(i)]));
  LAUNCH_KERNEL(cp_async_overwrite_kernel, 1, 1, 0, nullptr, in.data(), out.data(), true);
  CHECK(out == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("emu tensor cores: cp.async's sizes and alignment are checked", "[emu]") {
  std::vector<float> in(16, 1.f);
  const auto run = [&](int offset, int src_bytes) {
    return error_of([&] { LAUNCH_KERNEL(cp_async_misuse_kernel, 1, 1, 0, nullptr, in.data() + 0, offset, src_bytes); });
  };
  CHECK(run(4, 16).empty());
  CHECK_THAT(run(1, 16), Contains("is not 16-byte aligned"));
  CHECK_THAT(run(0, 17), Contains("src-size 17 is outside [0, 16]"));
}
