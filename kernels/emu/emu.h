// The g++ side of kernels/cuda/portable.cuh: what a CUDA kernel source needs
// in order to compile as plain C++ and run on the CPU under the emulator.
// Kernel sources never include this file directly; they include portable.cuh,
// which picks this file under g++ and the real CUDA headers under nvcc.
//
// Order matters and is the reason this file exists as one unit:
//  1. the CUDA keywords are defined BEFORE any CUDA header, so the toolkit's
//     crt/host_defines.h keeps ours (it only defines those not yet defined);
//  2. the toolkit's cuda_fp16.h / cuda_bf16.h give __half, __nv_bfloat16,
//     dim3, uint3, float4... (all host-usable in CUDA 13); without the
//     toolkit, emu_types.h supplies the vector types and half/bf16 are absent;
//  3. the intrinsics (__syncthreads, __shfl_*_sync...) are defined AFTER the
//     CUDA headers, as macros that record the call site (file:line) so that a
//     broken barrier or warp collective is reported where it is written.
// __CUDACC__ is never defined here: the toolkit headers then expose only their
// host paths, which is what runs on the CPU.
//
// Globals (the emulator inherently needs them, see docs/emulator.md):
// threadIdx, blockIdx, blockDim, gridDim are references to the emulator's
// "current fiber" state, updated at every fiber switch. Launches are
// serialised process-wide, so there is exactly one current fiber at a time.
#pragma once

#if defined(__CUDACC__)
#error "kernels/emu/emu.h is the g++ side of kernels/cuda/portable.cuh; nvcc must not include it"
#endif

// 1. Keywords. Kernels and device functions become ordinary C++ functions.
// __shared__ variables become thread-local statics: every fiber of a block
// runs on the launching OS thread, so they see one instance, exactly as the
// threads of a block share one. GCC 12 ignores section attributes on statics
// of template instantiations (GCC bug 70435), so a linker section cannot hold
// them; the thread's TLS block can, and the emulator poisons it per block
// (docs/emulator.md, "Shared memory"). `extern __shared__` does not compile
// here by design: use DYNAMIC_SMEM. __constant__ variables are plain globals
// (no cudaMemcpyToSymbol). g++ knows __restrict__ natively, so it stays as is.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __launch_bounds__(...)

#include <math.h>  // the C names (expf, fmaxf, ...) in the global namespace, as kernels spell them
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>

#include <utility>
#include <vector>

#include "kernels/emu/count_only.h"
#include "kernels/kernel_cost.h"

// 2. CUDA types.
#if defined(ENGINE_EMU_HAVE_CUDA_HEADERS)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include "kernels/emu/emu_types.h"
#endif
// crt/host_defines.h redefines __forceinline__ as always_inline (it #undefs
// it first); plain inline keeps device helpers steppable in gdb at -O0.
#undef __forceinline__
#define __forceinline__ inline

// Streams: the emulator runs every launch to completion before returning, so
// a stream is only a name. This typedef is token-identical to the toolkit's,
// so both may be visible without conflict.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;

inline constexpr int warpSize = 32;

namespace emu {

// Collective operations a warp can rendezvous on (warp.cpp).
// exchange: the .sync.aligned matrix instructions (mma.sync, ldmatrix:
// kernels/emu/tensor_core.h), which need all 32 lanes at one call site.
enum class WarpOp : uint8_t { sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all, exchange };

// What one lane brings to a warp collective.
struct WarpArgs {
  WarpOp op;
  unsigned mask;
  uint64_t value;  // the lane's operand as raw bytes (shuffles) or predicate
  uint32_t arg;    // srcLane / delta / laneMask (shuffles); the variant (exchange)
  int width;       // shuffle segment width, 32 otherwise
  int size;        // bytes of the shuffled type, or of each lane's block (exchange)
  const char* file;
  int line;
  const void* data = nullptr;  // exchange: the lane's block of `size` bytes
  const char* what = nullptr;  // exchange: the instruction, for messages
};

// Block barrier flavours: __syncthreads and its _count/_and/_or reductions.
enum class BarrierOp : uint8_t { plain, count, all, any };

// Everything the runtime needs to know about one launch.
struct LaunchSpec {
  dim3 grid, block;
  size_t smem_bytes;
  const char* file;  // LAUNCH_KERNEL call site
  int line;
  const char* what;     // the LAUNCH_KERNEL arguments as written (for messages)
  std::uintptr_t code;  // the kernel's address: finds the module whose __shared__ to poison
};

// Runs `thunk(ctx)` once per CUDA thread of every block, as described in
// docs/emulator.md; throws eng::Error (or the kernel's own exception) after
// the launch has been torn down.
void launch(const LaunchSpec& spec, void (*thunk)(void*), void* ctx);

// Tells a listening step profile (kernels/kernel_cost.h) of a launch; not
// from inside a kernel, where this module's thread-local block holds the
// shared-memory poison (the sink pointer is a thread_local; such a launch is
// refused anyway: dynamic parallelism).
void count_launch();

// Stream capture (kernels/emu/graph.h), declared here for launch_kernel_at.
bool capturing();
void enqueue(std::function<void()> work);

int barrier(BarrierOp op, int predicate, const char* file, int line);
uint64_t warp_collective(const WarpArgs& args);
// The .aligned warp exchange behind mma.sync and ldmatrix (warp.cpp): every
// lane of the warp posts `bytes` bytes and gets back all 32 lanes' blocks,
// lane after lane, valid until the warp's next exchange. All 32 lanes must
// exist, none may have exited, and all must call it at the same call site
// with the same variant (what the PTX ISA's .aligned asks); otherwise an
// error names the instruction, the site and the lane.
const unsigned char* warp_exchange(const void* mine, int bytes, uint32_t variant, const char* what, const char* file,
                                   int line);
// The shared-memory window (launch.cpp): a 32-bit shared address, as
// __cvta_generic_to_shared gives on the GPU, for a pointer into the launch's
// static or dynamic shared memory, and back. Static __shared__ variables sit
// at [0, static bytes), the dynamic buffer at the next multiple of 1024. A
// pointer or address outside both, or an address not `align`-aligned, is an
// error naming `what`, the site and the thread.
uint32_t shared_address(const void* p, const char* what, const char* file, int line);
unsigned char* shared_pointer(uint32_t addr, size_t bytes, size_t align, const char* what, const char* file, int line);
// cp.async's bookkeeping (async.cpp), one queue per CUDA thread: an issued
// copy waits, uncommitted, until commit_group closes its group; wait_group N
// hands back (in issue order) the copies of every group but the newest N,
// which the caller then performs, and poisons again those still pending.
// wait_all is commit + wait_group 0.
struct AsyncCopy {
  unsigned char* dst;
  const unsigned char* src;
  int bytes;      // cp-size: 4, 8 or 16
  int src_bytes;  // bytes read from src; the rest of dst is zero-filled
};
void cp_async_issue(const AsyncCopy& copy, const char* file, int line);
void cp_async_commit(const char* file, int line);
std::vector<AsyncCopy> cp_async_wait(int newest_pending, const char* file, int line);
// The copies issued and not yet handed back by a wait (open and committed).
std::vector<AsyncCopy> cp_async_pending(const char* file, int line);
unsigned char* dynamic_smem(const char* file, int line);
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// bytes): a launch of that kernel may then ask for up to `bytes` of dynamic
// shared memory; above 48 KiB without it, the launch fails as on a GPU.
void set_max_dynamic_smem(std::uintptr_t kernel, size_t bytes);
[[noreturn]] void trap(const char* file, int line);

namespace detail {
// The current fiber's coordinates (launch.cpp); read through the aliases below.
extern uint3 g_thread_idx;
extern uint3 g_block_idx;
extern dim3 g_block_dim;
extern dim3 g_grid_dim;

// Shuffles move any 1..8-byte value (int, float, double, __half, __half2,
// __nv_bfloat16...) as raw bytes. The void* casts allow types such as
// __half2 whose copy constructor is user-provided but which are plain bytes.
template <typename T>
T shfl(WarpOp op, const char* file, int line, unsigned mask, T var, int arg, int width) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "warp shuffles move at most 8 bytes, as on the GPU");
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const void*>(&var), sizeof(T));
  bits = warp_collective({op, mask, bits, static_cast<uint32_t>(arg), width, int(sizeof(T)), file, line});
  T out = var;
  std::memcpy(static_cast<void*>(&out), &bits, sizeof(T));
  return out;
}
}  // namespace detail

// The LAUNCH_KERNEL implementation under g++. Kernel parameters are copied
// once (converted to the kernel's parameter types, as CUDA does at launch)
// and every thread receives its own copy through std::apply.
template <typename... Params, typename... Args>
void launch_kernel_at(const char* file, int line, const char* what, void (*kernel)(Params...), dim3 grid, dim3 block,
                      size_t smem_bytes, cudaStream_t /*stream: launches are synchronous*/, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "LAUNCH_KERNEL: wrong number of kernel arguments");
  std::tuple<std::decay_t<Params>...> params{std::forward<Args>(args)...};
  const LaunchSpec spec{grid, block, smem_bytes, file, line, what, reinterpret_cast<std::uintptr_t>(kernel)};
  count_launch();
  // Under stream capture (graph.h) the launch is recorded with its own copy
  // of the parameters, as a CUDA graph kernel node keeps them, and runs at replay.
  auto run = [spec, kernel, params]() {
    auto body = [&]() { std::apply(kernel, params); };
    void (*const thunk)(void*) = [](void* p) { (*static_cast<decltype(body)*>(p))(); };
    launch(spec, thunk, &body);
  };
  if (capturing())
    enqueue(std::move(run));
  else
    run();
}

}  // namespace emu

// 3. Built-in variables and intrinsics. References defined once in
// launch.cpp (not inline: GCC would fold those away and gdb could not
// `print threadIdx` or break on `if threadIdx.x == 37`).
extern const uint3& threadIdx;
extern const uint3& blockIdx;
extern const dim3& blockDim;
extern const dim3& gridDim;

#define __syncthreads() ((void)::emu::barrier(::emu::BarrierOp::plain, 0, __FILE__, __LINE__))
#define __syncthreads_count(pred) ::emu::barrier(::emu::BarrierOp::count, (pred), __FILE__, __LINE__)
#define __syncthreads_and(pred) ::emu::barrier(::emu::BarrierOp::all, (pred), __FILE__, __LINE__)
#define __syncthreads_or(pred) ::emu::barrier(::emu::BarrierOp::any, (pred), __FILE__, __LINE__)

// Warp collectives: (mask, var, srcLane|delta|laneMask[, width]). The
// optional width is picked as the first of (given width, warpSize).
#define EMU_SHFL_(op, mask, var, arg, width, ...) \
  ::emu::detail::shfl(::emu::WarpOp::op, __FILE__, __LINE__, (mask), (var), (arg), (width))
#define __shfl_sync(mask, var, ...) EMU_SHFL_(shfl_idx, mask, var, __VA_ARGS__, warpSize)
#define __shfl_up_sync(mask, var, ...) EMU_SHFL_(shfl_up, mask, var, __VA_ARGS__, warpSize)
#define __shfl_down_sync(mask, var, ...) EMU_SHFL_(shfl_down, mask, var, __VA_ARGS__, warpSize)
#define __shfl_xor_sync(mask, var, ...) EMU_SHFL_(shfl_xor, mask, var, __VA_ARGS__, warpSize)
#define EMU_VOTE_(op, mask, pred) \
  ::emu::warp_collective({::emu::WarpOp::op, (mask), uint64_t((pred) != 0), 0, warpSize, 0, __FILE__, __LINE__})
#define __ballot_sync(mask, pred) static_cast<unsigned>(EMU_VOTE_(ballot, mask, pred))
#define __any_sync(mask, pred) static_cast<int>(EMU_VOTE_(any, mask, pred))
#define __all_sync(mask, pred) static_cast<int>(EMU_VOTE_(all, mask, pred))
#define EMU_FIRST_(a, ...) a
#define __syncwarp(...) ((void)EMU_VOTE_(sync, EMU_FIRST_(__VA_ARGS__ __VA_OPT__(, ) 0xffffffffu), 0))

#define __trap() ::emu::trap(__FILE__, __LINE__)

#include "kernels/emu/emu_intrinsics.h"

// The 32-bit shared address of a generic pointer (emu.h's shared_address;
// kernels/cuda/tensor_core.cuh's smem_addr is the usual spelling).
#define __cvta_generic_to_shared(p) \
  static_cast<size_t>(::emu::shared_address((p), "__cvta_generic_to_shared", __FILE__, __LINE__))
