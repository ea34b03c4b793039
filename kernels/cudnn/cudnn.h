// cuDNN as a vendor baseline beside our hand-written kernels: its fused
// scaled-dot-product attention (forward and backward, through the cuDNN
// frontend's graph API, the way llm.c's GPU trainer and PyTorch use it), its
// layernorm (the same graph API) and its softmax (the legacy
// cudnnSoftmaxForward/Backward). Plain C++ (no CUDA
// or cuDNN types), so engine code, the workbench and the cpu tests include
// it in every build.
//
// Two halves, like kernels/gemm/cublaslt.h:
//  - the host-side checks (cudnn_support.cpp, every build): which shapes
//    and types cuDNN's attention takes, and whether cuDNN can be used in
//    this process at all. They are what CI tests, having no GPU.
//  - CudnnContext and the calls (cudnn_*.cpp, CUDA builds that found the
//    frontend headers: ENGINE_HAVE_CUDNN): a handle, the attention plans
//    cached per shape, and the executions.
//
// libcudnn is loaded with dlopen on first use, never linked: a binary built
// here runs on a GPU machine without cuDNN, and says so when asked for it
// (cudnn_unavailable_reason) rather than failing to start. Nothing falls back
// silently: every entry point throws with the reason when cuDNN cannot run
// the call.
//
// Layouts: q, k, v, out and their gradients are (B, T, NH, HS) row-major, as
// our kernels/cuda/attention.cu takes them (cuDNN sees dims (B, NH, T, HS)
// with strides (T NH HS, HS, NH HS, 1): no copy). stats is cuDNN's fp32
// logsumexp of the scaled scores per query, (B, NH, T): the forward writes
// it, the backward reads it. The scale is 1/sqrt(HS), as ours.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/attention.h"  // gpu::AttentionMask, gpu::Storage

namespace eng {

// Whether this build has the cuDNN path (CUDA with the frontend headers).
bool cudnn_built();

// Why cuDNN cannot be used by this process ("" when it can): this build has
// no cuDNN path, no GPU answers, or libcudnn.so.9 could not be loaded (with
// the loader's message). Loads the library on the first call; never throws.
std::string cudnn_unavailable_reason();

// The loaded library's version ("9.19.0"), "" when unavailable.
std::string cudnn_version();

struct SdpaShape {
  int64_t B = 0, T = 0, NH = 0, HS = 0;
  // K/V heads (grouped-query attention: query head h reads K/V head
  // h / (NH / NKV), as cuDNN's sdpa takes k and v with fewer heads); 0: NH.
  int64_t NKV = 0;
  gpu::Storage st = gpu::Storage::bf16;
  gpu::AttentionMask mask = gpu::AttentionMask::causal;
  // q, k, v (and dq, dk, dv) in one packed (B, T, (NH + 2 NKV) HS) tensor,
  // read and written in place (rows (NH + 2 NKV) HS apart); out and dout
  // are (B, T, NH, HS).
  bool packed = false;
  int64_t kv_heads() const { return NKV ? NKV : NH; }
  std::string str() const;  // "B=2 T=1024 NH=12 HS=64 bf16 causal" (+ " NKV=4", " packed qkv")
};

// Why cuDNN's fused attention does not take this shape, "" when it does as
// far as the host can tell: storage must be bf16 or fp16 (cuDNN's flash
// attention has no fp32), HS a multiple of 8 and at most 128 (the backward's
// limit on Ampere, kept everywhere so a run does not depend on the GPU),
// every size at least 1, NKV dividing NH. cuDNN itself may still decline a shape when its
// plan is built; that is an error with cuDNN's message.
std::string cudnn_sdpa_unsupported(const SdpaShape& s);

enum class SdpaPass : uint8_t { forward, backward };

// The cuDNN frontend's own validation of the attention graph of one pass for
// a GPU architecture (sm_version 80: A100, 90: H100/H200), without a GPU:
// "" when the graph is well formed and within the frontend's support surface
// for that architecture, else its message (or cudnn_sdpa_unsupported's).
// Needs the cuDNN path built and libcudnn loadable; throws otherwise. The
// cpu tests run it, so a malformed graph fails CI, not the first GPU run.
std::string cudnn_sdpa_validate(const SdpaShape& s, SdpaPass pass, int sm_version);

// A cuDNN handle on one cuda device and the attention plans built on it, one
// per (shape, direction), built on first use and kept (building one takes
// milliseconds to seconds; executing it, microseconds). Not thread-safe,
// like the stream it serves. The constructor throws with
// cudnn_unavailable_reason() when cuDNN cannot be used.
class CudnnContext {
 public:
  explicit CudnnContext(int device);
  ~CudnnContext();
  CudnnContext(const CudnnContext&) = delete;
  CudnnContext& operator=(const CudnnContext&) = delete;
  int device() const;
  size_t cached_plans() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The workspace (device bytes) a pass needs; builds and caches the plan on
// the first call for a shape, and throws, naming the shape, when cuDNN has no
// engine for it.
size_t cudnn_sdpa_workspace(CudnnContext& ctx, const SdpaShape& s, SdpaPass pass);

// out = softmax(q k^T / sqrt(HS), masked) v and stats, on `stream` (a
// cudaStream_t; nullptr: the legacy default stream). workspace: at least
// cudnn_sdpa_workspace(ctx, s, forward) device bytes (may be null if 0).
void cudnn_sdpa_forward(CudnnContext& ctx, const SdpaShape& s, const void* q, const void* k, const void* v, void* out,
                        float* stats, void* workspace, void* stream);

// dq, dk, dv (written, =) from dout and the forward's q, k, v, out, stats.
void cudnn_sdpa_backward(CudnnContext& ctx, const SdpaShape& s, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* stats, void* dq, void* dk, void* dv,
                         void* workspace, void* stream);

// Layernorm over the last dim of (N, C), f32, as kernels/cuda/layernorm.cu:
// y = (x - mean) rstd w + b, the fp32 mean and rstd = 1/sqrt(var + eps) per
// row saved (cuDNN's inv_variance); backward writes (=) dx, dw, db. Plans
// are cached per (N, C, pass) like the attention's; a workspace as there.
enum class LayernormPass : uint8_t { forward, backward };
std::string cudnn_layernorm_validate(int64_t N, int64_t C, LayernormPass pass, int sm_version);
size_t cudnn_layernorm_workspace(CudnnContext& ctx, int64_t N, int64_t C, LayernormPass pass);
void cudnn_layernorm_forward(CudnnContext& ctx, const float* x, const float* w, const float* b, float* y, float* mean,
                             float* rstd, int64_t N, int64_t C, double eps, void* workspace, void* stream);
void cudnn_layernorm_backward(CudnnContext& ctx, const float* dy, const float* x, const float* w, const float* mean,
                              const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C, void* workspace,
                              void* stream);

// Softmax over the last dim of (rows, C) in storage st: cuDNN's
// CUDNN_SOFTMAX_ACCURATE (max-subtracted), CUDNN_SOFTMAX_MODE_INSTANCE over
// a (rows, C, 1, 1) tensor. Backward: dx = y (dy - sum(dy y)).
void cudnn_softmax_forward(CudnnContext& ctx, gpu::Storage st, const void* x, void* y, int64_t rows, int64_t C,
                           void* stream);
void cudnn_softmax_backward(CudnnContext& ctx, gpu::Storage st, const void* y, const void* dy, void* dx, int64_t rows,
                            int64_t C, void* stream);

}  // namespace eng
