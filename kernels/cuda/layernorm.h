// Launchers of kernels/cuda/layernorm.cu (the forwards) and
// kernels/cuda/layernorm_backward.cu (the backwards): layernorm over the last dim (C) of
// N rows, forward (saving fp32 mean and rstd per row), the residual add fused
// with the forward, and the backward (dx, dweight, dbias; deterministic),
// which adds the residual stream's pending gradient into dx when given one
// (dresidual; nullptr: the plain backward), and writes dweight/dbias in
// the storage type or in fp32, or adds them to fp32 ones (gpu::ParamGrads),
// and, given dx_sums (nullptr: none), dx's column sums as stored, in fp32:
// the bias gradient of the linear layer whose output x is, when dx is its
// output's whole gradient (engine/ops/layernorm.cpp), with no pass over dx
// of its own.
// The rmsnorm_* launchers: RMSNorm (Llama's) by the same kernels, no mean,
// no bias, rstd alone saved; the same scratch, row widths and grids.
#pragma once
#include <atomic>

#include "kernels/cuda/env_form.h"
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// What fused_residual_layernorm_backward writes dweight/dbias as: in the
// storage type; in fp32 (16-bit storage, the masters' gradients of
// autocast's weight copies: no cast after); or added in fp32 to what they
// hold (a later micro-batch's, into the masters' gradients).
enum class ParamGrads : uint8_t { storage, f32, f32_add };

// Which form of the warp backward runs on rows of three or four 16-byte
// packs a lane (GPT-2's C = 768 in 16-bit storage; docs/kernels/layernorm.md,
// "Prefetched: the next row in shared memory"): `automatic` takes the
// prefetching kernel (the warp's next row copied into shared memory by
// cp.async while it works on this one) where the launcher picks the staged
// kernel (16 rows a warp or more) and the device's shared memory holds the
// block's row buffers; `prefetch` takes it and `staged` the register-staged
// kernel alone (the fourth H200 run's) at any number of rows (16-byte
// packs). Both give the same bits. For A/B runs on a GPU
// (ENGINE_LAYERNORM_BACKWARD=auto|prefetch|staged) and for tests.
enum class LayernormBackwardForm { automatic, prefetch, staged };
// -1: not yet read from ENGINE_LAYERNORM_BACKWARD. One variable for the
// program (inline), whichever of the cuda and emulator builds reads it.
inline std::atomic<int> g_layernorm_backward_form{-1};
inline void set_layernorm_backward_form(LayernormBackwardForm f) { g_layernorm_backward_form.store(int(f)); }
inline LayernormBackwardForm layernorm_backward_form() {
  int v = g_layernorm_backward_form.load();
  if (v < 0) {
    v = env_form("ENGINE_LAYERNORM_BACKWARD", {"auto", "prefetch", "staged"}, "the layernorm backward",
                 "docs/kernels/layernorm.md");  // in the enum's order
    g_layernorm_backward_form.store(v);
  }
  return LayernormBackwardForm(v);
}

// fused_residual_layernorm_backward sums dweight/dbias per block into an
// fp32 scratch buffer of this many floats (2 C per block, at most this many
// blocks), then reduces the blocks' partial sums in a fixed order. Rows up to
// 256 (fp32: 128, unaligned: 32) 16-byte packs wide take the warp-per-row
// kernel on at most kLayernormBackwardWarpBlocks blocks (8 warps each; 12
// for the staged kernel at three packs a lane, on the capped grid alone),
// wider rows a block per row.
inline constexpr int64_t kLayernormBackwardMaxBlocks = 1024;
inline constexpr int64_t kLayernormBackwardWarpBlocks = 256;
// With dx's column sums (dx_sums), 3 C per block.
inline int64_t layernorm_backward_scratch_floats(int64_t N, int64_t C, bool dx_sums = false) {
  return (dx_sums ? 3 : 2) * C * (N < kLayernormBackwardMaxBlocks ? N : kLayernormBackwardMaxBlocks);
}
// The widest row fused_residual_layernorm_backward takes: 2 C fp32 accumulators per block
// must fit the 48 KiB of shared memory a kernel gets without opting in; 3 C
// with dx's column sums.
inline constexpr int64_t kLayernormBackwardMaxC = 6000;
inline constexpr int64_t kLayernormBackwardMaxCSums = 4000;
// The blocks the backward of N rows of C launches on a GPU (the emulator
// caps every grid lower): the warp kernel's, or one a row for wide rows.
// The warp kernel takes rows of up to 8 x 32 lanes x 16-byte packs; the
// vector path needs C % pack == 0 (the launcher also checks alignment).
inline int64_t layernorm_backward_blocks(int64_t N, int64_t C, Storage st) {
  const int64_t pack = int64_t(16 / storage_bytes(st)), per_lane = C % pack == 0 ? pack : 1;
  if ((C + 32 * per_lane - 1) / (32 * per_lane) <= 8) {
    const int64_t want = (N + 7) / 8;
    return want < kLayernormBackwardWarpBlocks ? want : kLayernormBackwardWarpBlocks;
  }
  return N < kLayernormBackwardMaxBlocks ? N : kLayernormBackwardMaxBlocks;
}
}  // namespace eng::gpu

#define ENGINE_LAYERNORM_LAUNCHERS                                                                                   \
  void layernorm_forward(gpu::Storage st, const void* x, const void* w, const void* b, void* out, float* mean,       \
                         float* rstd, int64_t N, int64_t C, double eps, void* stream);                               \
  void fused_residual_layernorm_forward(gpu::Storage st, const void* x, const void* r, const void* w, const void* b, \
                                        void* residual, void* out, float* mean, float* rstd, int64_t N, int64_t C,   \
                                        double eps, void* stream);                                                   \
  void fused_residual_layernorm_backward(gpu::Storage st, const void* dout, const void* x, const void* w,            \
                                         const float* mean, const float* rstd, const void* dresidual, void* dx,      \
                                         void* dw, void* db, float* dx_sums, gpu::ParamGrads param_grads,            \
                                         float* scratch, int64_t N, int64_t C, void* stream);
ENGINE_GPU_DECLARE(ENGINE_LAYERNORM_LAUNCHERS)

#define ENGINE_RMSNORM_LAUNCHERS                                                                                    \
  void rmsnorm_forward(gpu::Storage st, const void* x, const void* w, void* out, float* rstd, int64_t N, int64_t C, \
                       double eps, void* stream);                                                                   \
  void fused_residual_rmsnorm_forward(gpu::Storage st, const void* x, const void* r, const void* w, void* residual, \
                                      void* out, float* rstd, int64_t N, int64_t C, double eps, void* stream);      \
  void fused_residual_rmsnorm_backward(                                                                             \
      gpu::Storage st, const void* dout, const void* x, const void* w, const float* rstd, const void* dresidual,    \
      void* dx, void* dw, gpu::ParamGrads param_grads, float* scratch, int64_t N, int64_t C, void* stream);
ENGINE_GPU_DECLARE(ENGINE_RMSNORM_LAUNCHERS)

// Costs (kernels/kernel_cost.h): forward: bytes = N C (2 sizeof(T)) + 2 C
// sizeof(T) + 8 N, flops ~ 8 N C; fused residual: bytes = N C (4 sizeof(T))
// + 2 C sizeof(T) + 8 N, flops ~ 9 N C; backward: bytes = N C ((3 +
// [dresidual]) sizeof(T)) + 8 N + C sizeof(T) + blocks 2 C 4 (the partials
// written), then blocks 2 C 4 + 2 C sizeof(T) (read, dw and db written;
// 4 bytes each for ParamGrads::f32, 8 read and written for f32_add),
// flops ~ 15 N C + 2 blocks C, blocks the grid of the kernel the row width
// takes (layernorm_backward_blocks); with dx_sums, blocks C 8 more (the third
// partial written and read) and 4 C (the sums written), flops + N C + blocks
// C. RMSNorm: forward bytes = N C (2
// sizeof(T)) + C sizeof(T) + 4 N, flops ~ 4 N C; fused residual: N C (4
// sizeof(T)) + C sizeof(T) + 4 N, flops ~ 5 N C; backward: as layernorm's
// with 4 N (rstd alone), no db (C (t + tw)), partials of C (8 blocks C),
// flops ~ 9 N C + blocks C.
namespace eng::kcost {
inline kprof::Cost layernorm_forward(gpu::Storage st, const void*, const void*, const void*, void*, float*, float*,
                                     int64_t N, int64_t C, double, void*) {
  const double nc = double(N) * double(C), t = gpu::storage_bytes(st);
  return kprof::memory(2 * nc * t + 2 * double(C) * t + 8 * double(N), 8 * nc);
}
inline kprof::Cost fused_residual_layernorm_forward(gpu::Storage st, const void*, const void*, const void*, const void*,
                                                    void*, void*, float*, float*, int64_t N, int64_t C, double, void*) {
  const double nc = double(N) * double(C), t = gpu::storage_bytes(st);
  return kprof::memory(4 * nc * t + 2 * double(C) * t + 8 * double(N), 9 * nc);
}
inline kprof::Cost fused_residual_layernorm_backward(gpu::Storage st, const void*, const void*, const void*,
                                                     const float*, const float*, const void* dresidual, void*, void*,
                                                     void*, float* dx_sums, gpu::ParamGrads param_grads, float*,
                                                     int64_t N, int64_t C, void*) {
  const double nc = double(N) * double(C), t = gpu::storage_bytes(st);
  // dw and db: written in T or fp32, or read and written in fp32
  const double tw = param_grads == gpu::ParamGrads::storage ? t : param_grads == gpu::ParamGrads::f32 ? 4 : 8;
  const double blocks = double(gpu::layernorm_backward_blocks(N, C, st));
  const double sums = dx_sums ? 1 : 0;  // dx's column sums: a third partial, C floats written
  return kprof::memory((dresidual ? 4 : 3) * nc * t + 8 * double(N) + double(C) * (t + 2 * tw + 4 * sums) +
                           (16 + 8 * sums) * blocks * double(C),
                       (15 + sums) * nc + (2 + sums) * blocks * double(C));
}
inline kprof::Cost rmsnorm_forward(gpu::Storage st, const void*, const void*, void*, float*, int64_t N, int64_t C,
                                   double, void*) {
  const double nc = double(N) * double(C), t = gpu::storage_bytes(st);
  return kprof::memory(2 * nc * t + double(C) * t + 4 * double(N), 4 * nc);
}
inline kprof::Cost fused_residual_rmsnorm_forward(gpu::Storage st, const void*, const void*, const void*, void*, void*,
                                                  float*, int64_t N, int64_t C, double, void*) {
  const double nc = double(N) * double(C), t = gpu::storage_bytes(st);
  return kprof::memory(4 * nc * t + double(C) * t + 4 * double(N), 5 * nc);
}
inline kprof::Cost fused_residual_rmsnorm_backward(gpu::Storage st, const void*, const void*, const void*, const float*,
                                                   const void* dresidual, void*, void*, gpu::ParamGrads param_grads,
                                                   float*, int64_t N, int64_t C, void*) {
  const double nc = double(N) * double(C), t = gpu::storage_bytes(st);
  const double tw = param_grads == gpu::ParamGrads::storage ? t : param_grads == gpu::ParamGrads::f32 ? 4 : 8;
  const double blocks = double(gpu::layernorm_backward_blocks(N, C, st));
  return kprof::memory((dresidual ? 4 : 3) * nc * t + 4 * double(N) + double(C) * (t + tw) + 8 * blocks * double(C),
                       9 * nc + blocks * double(C));
}
}  // namespace eng::kcost
