// Probes of the tensor-core instructions (kernels/cuda/tensor_core.cuh): each
// kernel runs one instruction on registers or shared memory the caller
// fills lane by lane and writes what every lane got back, so a test can check
// each lane against the PTX ISA's layouts on both devices: under the emulator
// in CI, and on a GPU (gpu.kernel_suite), where the same test checks the
// emulator's layouts against the hardware. tests/kernels/test_tensor_core_emu.cpp.
#include "kernels/cuda/tensor_core_probe.h"

#include "kernels/cuda/storage.cuh"
#include "kernels/cuda/tensor_core.cuh"

namespace eng::ENGINE_GPU_NS {

// d[lane][0..4) = mma(a[lane], b[lane], c[lane]) for one warp. kRegsA/kRegsB:
// the A and B registers a lane holds (4/2 for k16, 2/1 for k8).
// Launch: 1 block of 32. bytes = 32 (4 kRegsA + 4 kRegsB + 32), flops = 2 16 8 K.
template <int kKind>
__global__ void tc_probe_mma_kernel(const uint32_t* __restrict__ a, const uint32_t* __restrict__ b,
                                    const float* __restrict__ c, float* __restrict__ d) {
  const int lane = int(threadIdx.x);
  float cc[4], dd[4];
  for (int i = 0; i < 4; ++i) cc[i] = c[lane * 4 + i];
  if constexpr (kKind == 0 || kKind == 1) {
    const uint32_t ra[4] = {a[lane * 4], a[lane * 4 + 1], a[lane * 4 + 2], a[lane * 4 + 3]};
    const uint32_t rb[2] = {b[lane * 2], b[lane * 2 + 1]};
    if constexpr (kKind == 0)
      tc::mma_m16n8k16_bf16(dd, ra, rb, cc);
    else
      tc::mma_m16n8k16_f16(dd, ra, rb, cc);
  } else {
    const uint32_t ra[2] = {a[lane * 4], a[lane * 4 + 1]};
    const uint32_t rb[1] = {b[lane * 2]};
    if constexpr (kKind == 2)
      tc::mma_m16n8k8_bf16(dd, ra, rb, cc);
    else
      tc::mma_m16n8k8_f16(dd, ra, rb, cc);
  }
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = dd[i];
}

// The tile (rows x 8 16-bit elements) copied to shared memory; lane l passes
// the address of row row_of_lane[l]; out[lane][m] = its register of matrix m.
// Launch: 1 block of 32, dynamic smem 16 rows. bytes = 16 rows + 128 + 128 count.
template <int kCount, bool kTrans>
__global__ void tc_probe_ldmatrix_kernel(const uint16_t* __restrict__ tile, int rows,
                                         const int32_t* __restrict__ row_of_lane, uint32_t* __restrict__ out) {
  DYNAMIC_SMEM(uint16_t, smem);
  const int lane = int(threadIdx.x);
  for (int i = lane; i < rows * 8; i += 32) smem[i] = tile[i];
  __syncthreads();
  const uint32_t addr = tc::smem_addr(smem + row_of_lane[lane] * 8);
  uint32_t r[kCount];
  if constexpr (kCount == 1) {
    if constexpr (kTrans)
      tc::ldmatrix_x1_trans(r, addr);
    else
      tc::ldmatrix_x1(r, addr);
  } else if constexpr (kCount == 2) {
    if constexpr (kTrans)
      tc::ldmatrix_x2_trans(r, addr);
    else
      tc::ldmatrix_x2(r, addr);
  } else {
    if constexpr (kTrans)
      tc::ldmatrix_x4_trans(r, addr);
    else
      tc::ldmatrix_x4(r, addr);
  }
  for (int m = 0; m < kCount; ++m) out[lane * kCount + m] = r[m];
}

// A two-stage cp.async pipeline: chunk j (kBytes of src) goes to shared
// memory, stage s = chunks [64 s, 64 s + 64), double-buffered; after each
// stage's wait and barrier, thread t writes the chunk thread t + 1 copied
// (so the barrier and the wait are both load-bearing) to its place in out.
// Each copy reads src_bytes of its chunk and zero-fills the rest.
// Launch: 1 block of 64, dynamic smem 2 64 kBytes. Precondition: n_chunks % 64 == 0.
// bytes = n_chunks (src_bytes + kBytes), flops = 0.
template <int kBytes, bool kCg>
__global__ void tc_probe_cp_async_kernel(const unsigned char* __restrict__ src, int n_chunks, int src_bytes,
                                         unsigned char* __restrict__ out) {
  DYNAMIC_SMEM(unsigned char, smem);
  const int t = int(threadIdx.x), stages = n_chunks / 64;
  const auto issue = [&](int s) {
    const int j = s * 64 + t;
    const uint32_t dst = tc::smem_addr(smem + ((s % 2) * 64 + t) * kBytes);
    if constexpr (kCg)
      tc::cp_async_cg(dst, src + int64_t(j) * kBytes, src_bytes);
    else
      tc::cp_async_ca<kBytes>(dst, src + int64_t(j) * kBytes, src_bytes);
    tc::cp_async_commit();
  };
  issue(0);
  for (int s = 0; s < stages; ++s) {
    if (s + 1 < stages) {
      issue(s + 1);
      tc::cp_async_wait_group<1>();  // stage s has landed; s + 1 may still be in flight
    } else {
      tc::cp_async_wait_all();
    }
    __syncthreads();
    const int from = (t + 1) % 64;
    const unsigned char* chunk = smem + ((s % 2) * 64 + from) * kBytes;
    for (int k = 0; k < kBytes; ++k) out[int64_t(s * 64 + from) * kBytes + k] = chunk[k];
    __syncthreads();  // the buffer is refilled by stage s + 2's copies
  }
}

void tc_probe_mma(int kind, const uint32_t* a, const uint32_t* b, const float* c, float* d, void* stream) {
  ENGINE_CHECK(kind >= 0 && kind < 4, "tc_probe_mma: kind ", kind, " (0..3)");
  const auto go = [&](auto kernel) { LAUNCH_KERNEL(kernel, 1, 32, 0, as_stream(stream), a, b, c, d); };
  if (kind == 0) go(tc_probe_mma_kernel<0>);
  if (kind == 1) go(tc_probe_mma_kernel<1>);
  if (kind == 2) go(tc_probe_mma_kernel<2>);
  if (kind == 3) go(tc_probe_mma_kernel<3>);
}

void tc_probe_ldmatrix(int count, bool trans, const uint16_t* tile, int rows, const int32_t* row_of_lane, uint32_t* out,
                       void* stream) {
  ENGINE_CHECK(count == 1 || count == 2 || count == 4, "tc_probe_ldmatrix: count ", count, " (1, 2 or 4)");
  const size_t smem = size_t(rows) * 16;
  const auto go = [&](auto kernel) {
    LAUNCH_KERNEL(kernel, 1, 32, smem, as_stream(stream), tile, rows, row_of_lane, out);
  };
  if (count == 1) trans ? go(tc_probe_ldmatrix_kernel<1, true>) : go(tc_probe_ldmatrix_kernel<1, false>);
  if (count == 2) trans ? go(tc_probe_ldmatrix_kernel<2, true>) : go(tc_probe_ldmatrix_kernel<2, false>);
  if (count == 4) trans ? go(tc_probe_ldmatrix_kernel<4, true>) : go(tc_probe_ldmatrix_kernel<4, false>);
}

void tc_probe_cp_async(int bytes, bool cg, const void* src, int n_chunks, int src_bytes, void* out, void* stream) {
  ENGINE_CHECK(n_chunks > 0 && n_chunks % 64 == 0, "tc_probe_cp_async: ", n_chunks, " chunks (a multiple of 64)");
  ENGINE_CHECK(!cg || bytes == 16, "tc_probe_cp_async: cp.async.cg copies 16 bytes, not ", bytes);
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(out);
  const auto go = [&](auto kernel, int b) {
    LAUNCH_KERNEL(kernel, 1, 64, size_t(2 * 64 * b), as_stream(stream), s, n_chunks, src_bytes, o);
  };
  if (cg)
    go(tc_probe_cp_async_kernel<16, true>, 16);
  else if (bytes == 4)
    go(tc_probe_cp_async_kernel<4, false>, 4);
  else if (bytes == 8)
    go(tc_probe_cp_async_kernel<8, false>, 8);
  else if (bytes == 16)
    go(tc_probe_cp_async_kernel<16, false>, 16);
  else
    ENGINE_FAIL("tc_probe_cp_async: cp.async copies 4, 8 or 16 bytes, not ", bytes);
}

}  // namespace eng::ENGINE_GPU_NS
