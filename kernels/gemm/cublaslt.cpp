// The cuBLASLt executor of kernels/gemm/cublaslt.h, CUDA builds only. The
// layout is decided by plan_cublaslt (cublaslt_plan.cpp, tested on the cpu);
// this file only turns a plan into descriptors, asks the heuristic once per
// distinct call (and times its first candidates: the fastest is kept), and
// makes the one cublasLtMatmul call. Every CUDA/cuBLAS
// call goes through CUDA_CHECK / CUBLAS_CHECK (base/error.h's idiom:
// file:line, the call as written, the status name).
#include "kernels/gemm/cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>

#include "base/error.h"
#include "kernels/kernel_cost.h"

#define ENGINE_LT_CHECK_GEN(call, ok, name_of)                                                    \
  do {                                                                                            \
    const auto status_ = (call);                                                                  \
    ENGINE_CHECK(status_ == (ok), #call, " failed: ", name_of(status_), " (", int(status_), ")"); \
  } while (0)
#define CUDA_CHECK(call) ENGINE_LT_CHECK_GEN(call, cudaSuccess, cudaGetErrorName)
#define CUBLAS_CHECK(call) ENGINE_LT_CHECK_GEN(call, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusName)

namespace eng {
namespace {

cudaDataType_t data_type(gpu::Storage st) {
  return st == gpu::Storage::bf16 ? CUDA_R_16BF : st == gpu::Storage::f16 ? CUDA_R_16F : CUDA_R_32F;
}
cublasOperation_t op(LtOp t) { return t == LtOp::N ? CUBLAS_OP_N : CUBLAS_OP_T; }
cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::none:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::gelu_bias:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    case Epilogue::gelu_aux_bias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::bgrad:
      return CUBLASLT_EPILOGUE_BGRADB;  // our A is cuBLASLt's B (see the header)
    case Epilogue::bias_residual:
      return CUBLASLT_EPILOGUE_BIAS;  // the residual is C, with beta 1 (gemm below)
    case Epilogue::residual:
      return CUBLASLT_EPILOGUE_DEFAULT;  // the same, without the bias
    case Epilogue::dgelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::dgelu_bgrad:
      return CUBLASLT_EPILOGUE_DGELU_BGRAD;  // its sums have D's rows: the row-major N (bias_len)
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Largest power of two (<= 256) dividing the address: the heuristic picks
// vectorised kernels only for aligned operands, so alignment is part of the key.
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// Everything the descriptors and the heuristic depend on.
using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int, int, int, bool, bool, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t t, const LtLayout& l, int64_t batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, t, uint64_t(l.rows), uint64_t(l.cols), l.ld));
  if (batch > 1) {
    const int32_t count = int32_t(batch);
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.stride,
                                                  sizeof(l.stride)));
  }
  return layout;
}

// Autotuning (ENGINE_CUBLASLT_TUNE=1; off by default): the heuristic's
// first kTuneCandidates algorithms without split-K (one kernel each, as the
// step profile counts them), each timed once on the call's own operands, the
// fastest kept for the key. The heuristic's first is not always the
// fastest for a shape; timing once per key costs a few ms at the first step.
// Off by default because timing noise may pick another algorithm in another
// process (a resumed run, another rank), and another algorithm sums in
// another order: a run would no longer repeat bit for bit.
constexpr int kCandidates = 8;
bool tune_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ENGINE_CUBLASLT_TUNE");
    return v && std::string(v) == "1";
  }();
  return on;
}

// Whether an algorithm can write D apart from C (the residual epilogue's
// C is the residual stream): the heuristic is asked with one layout for
// both and cannot know that the pointers differ.
bool out_of_place(const cublasLtMatmulAlgo_t& a) {
  int32_t ok = 0;
  size_t written = 0;
  return cublasLtMatmulAlgoCapGetAttribute(&a, CUBLASLT_ALGO_CAP_OUT_OF_PLACE_RESULT_SUPPORT, &ok, sizeof(ok),
                                           &written) == CUBLAS_STATUS_SUCCESS &&
         ok != 0;
}

uint32_t split_k(const cublasLtMatmulAlgo_t& a) {
  uint32_t n = 1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &n, sizeof(n), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return 1;
  return n;
}

// The operands of one cublasLtMatmul call, as the timing runs repeat it.
struct LtCall {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  const void *alpha, *first, *second, *beta, *c_in;
  void* d;
  size_t d_bytes;  // D's extent, for a scratch D
  void* workspace;
  cudaStream_t stream;
};

// The index of the fastest of `n` candidates: a warm-up and three runs each,
// timed with CUDA events on the call's stream, D redirected to a scratch
// buffer when the product reads it (beta != 0: an accumulation must not run
// four times more); the epilogue's other outputs (bias gradient, GELU aux)
// are written and then rewritten by the real call. 0 where it cannot time:
// during a graph capture, without scratch memory, or when every run fails.
int fastest(const LtCall& k, bool reads_d, const cublasLtMatmulHeuristicResult_t* cand, int n) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  // An error already pending is the caller's to see: nothing is timed then.
  if (n < 2 || cudaPeekAtLastError() != cudaSuccess || cudaStreamIsCapturing(k.stream, &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone)
    return 0;
  void* d = k.d;
  if (reads_d && cudaMalloc(&d, k.d_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  int best = 0;
  float best_ms = -1.f;
  if (cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess) {
    for (int i = 0; i < n; ++i) {
      auto run = [&] {
        return cublasLtMatmul(k.handle, k.desc, k.alpha, k.first, k.a, k.second, k.b, k.beta, k.c_in, k.c, d, k.c,
                              &cand[i].algo, k.workspace, CublasLtContext::kWorkspaceBytes, k.stream);
      };
      if (run() != CUBLAS_STATUS_SUCCESS) continue;  // this algorithm refuses the call: skip it
      bool ok = cudaEventRecord(start, k.stream) == cudaSuccess;
      for (int r = 0; r < 3 && ok; ++r) ok = run() == CUBLAS_STATUS_SUCCESS;
      float ms = 0.f;
      ok = ok && cudaEventRecord(stop, k.stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
           cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
      if (ok && (best_ms < 0 || ms < best_ms)) best = i, best_ms = ms;
    }
  }
  if (start) (void)cudaEventDestroy(start);
  if (stop) (void)cudaEventDestroy(stop);
  if (d != k.d) (void)cudaFree(d);
  (void)cudaGetLastError();  // a refused candidate's error (none was pending before) is not the caller's
  return best;
}

// The descriptors and algorithm of one key, created on its first call.
struct Entry {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Entry() = default;
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  ~Entry() {  // destructors do not throw: statuses are ignored here
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};
}  // namespace

struct CublasLtContext::Impl {
  int device = 0;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<Key, Entry> cache;
};

CublasLtContext::CublasLtContext(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  CUDA_CHECK(cudaSetDevice(device));
  CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
}

CublasLtContext::~CublasLtContext() {
  impl_->cache.clear();
  if (impl_->workspace) (void)cudaFree(impl_->workspace);
  if (impl_->handle) (void)cublasLtDestroy(impl_->handle);
}

int CublasLtContext::device() const { return impl_->device; }
size_t CublasLtContext::cached_algorithms() const { return impl_->cache.size(); }

void gemm(CublasLtContext& ctx, const GemmCall& call, gpu::Storage st, const void* A, const void* B, void* C,
          const void* bias, Epilogue epi, void* aux, ComputeMode mode, void* stream) {
  ENGINE_CHECK(compute_mode_fits(st, mode), "cublaslt: compute mode ", int(mode), " does not fit storage ", int(st));
  const bool dgelu = epi == Epilogue::dgelu || epi == Epilogue::dgelu_bgrad, residual = epilogue_adds_residual(epi);
  // Whether cuBLASLt is given a bias pointer: read by the bias epilogues, written by bgrad.
  const bool has_bias = epilogue_takes_bias(epi);
  ENGINE_CHECK(!has_bias || bias, "cublaslt: the epilogue needs a bias pointer");
  ENGINE_CHECK(epi != Epilogue::residual || !bias,
               "cublaslt: the residual epilogue takes no bias (bias_residual does)");
  ENGINE_CHECK((epi != Epilogue::bgrad && epi != Epilogue::dgelu_bgrad) || call.batch == 1,
               "cublaslt: the bias-gradient epilogues need batch == 1");
  ENGINE_CHECK(epilogue_takes_aux(epi) == (aux != nullptr),
               "cublaslt: an aux matrix goes with the gelu_aux_bias, dgelu, bias_residual and residual epilogues, and "
               "only with them");
  ENGINE_CHECK(!residual || call.beta == 0.f, "cublaslt: the residual epilogue is C with beta 1 (call.beta must be 0)");
  ENGINE_CHECK(!call.out_f32 || (st != gpu::Storage::f32 && (epi == Epilogue::none || epi == Epilogue::bgrad)),
               "cublaslt: an fp32 D of 16-bit operands takes no epilogue but the bias gradient");
  LtPlan p = plan_cublaslt(call);
  if (residual) p.beta = 1.f;  // D = op(A) op(B) + R + bias, R read as cuBLASLt's C
  ENGINE_CHECK((epi != Epilogue::gelu_aux_bias && !dgelu) || lt_aux_ok(p),
               "cublaslt: the GELU epilogues need the aux ld (", p.aux_ld, ") and batch stride (", p.aux_stride,
               ") divisible by 8");
  CUDA_CHECK(cudaSetDevice(ctx.device()));  // the workspace and the handle belong to this device
  const void* first = p.first_is_b ? B : A;
  const void* second = p.first_is_b ? A : B;
  // cuBLASLt's C (read when beta != 0): the residual, else D itself.
  const void* c_in = residual ? aux : C;
  CublasLtContext::Impl& im = ctx.impl();

  const Key key{
      p.m,           p.n,           p.k,          int(p.transa),    int(p.transb),     p.a.ld,       p.b.ld,
      p.c.ld,        p.a.stride,    p.b.stride,   p.c.stride,       p.batch,           int(st),      int(mode),
      int(epi),      p.beta != 0.f, call.out_f32, alignment(first), alignment(second), alignment(C), alignment(bias),
      alignment(aux)};
  auto [it, fresh] = im.cache.try_emplace(key);
  Entry& e = it->second;
  if (fresh) {
    try {
      const cudaDataType_t t = data_type(st);
      // D (and C, and a bias gradient) in fp32 for out_f32: bf16/fp16 A and B with
      // an fp32 D is one of cuBLASLt's supported type combinations.
      const cudaDataType_t td = call.out_f32 ? CUDA_R_32F : t;
      const cublasComputeType_t compute = mode == ComputeMode::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      CUBLAS_CHECK(cublasLtMatmulDescCreate(&e.desc, compute, CUDA_R_32F));
      set_desc(e.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(op(p.transa)));
      set_desc(e.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(op(p.transb)));
      set_desc(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(lt_epilogue(epi)));
      if (has_bias) {
        set_desc(e.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(td));
        set_desc(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads its alignment
      }
      if (epi == Epilogue::gelu_aux_bias || dgelu) {  // aux has D's data type (the default) and C's layout
        set_desc(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
        set_desc(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.aux_ld);
        if (p.batch > 1) set_desc(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, p.aux_stride);
      }
      e.a = make_layout(t, p.a, p.batch);
      e.b = make_layout(t, p.b, p.batch);
      e.c = make_layout(td, p.c, p.batch);

      cublasLtMatmulPreference_t pref = nullptr;
      CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      cublasLtMatmulHeuristicResult_t results[kCandidates]{};
      int found = 0;
      try {
        const uint64_t ws = CublasLtContext::kWorkspaceBytes;
        CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        const uint32_t align[4] = {alignment(first), alignment(second), alignment(c_in), alignment(C)};
        const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        for (int i = 0; i < 4; ++i)
          CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &align[i], sizeof(align[i])));
        // Several candidates when they will be timed, or filtered for a D apart from C.
        const int ask = tune_enabled() || c_in != C ? kCandidates : 1;
        CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(im.handle, e.desc, e.a, e.b, e.c, e.c, pref, ask, results, &found));
      } catch (...) {
        (void)cublasLtMatmulPreferenceDestroy(pref);
        throw;
      }
      CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
      ENGINE_CHECK(found > 0, "cublaslt: no algorithm for m ", p.m, " n ", p.n, " k ", p.k, " batch ", p.batch,
                   " epilogue ", int(epi), " compute mode ", int(mode));
      // The heuristic's order, less the algorithms that cannot write D apart
      // from C where it is apart, and the split-K ones after the first.
      int n = 0;
      for (int i = 0; i < found; ++i)
        if ((c_in == C || out_of_place(results[i].algo)) && (n == 0 || split_k(results[i].algo) <= 1))
          results[n++] = results[i];
      ENGINE_CHECK(n > 0, "cublaslt: no algorithm writes D apart from C for m ", p.m, " n ", p.n, " k ", p.k,
                   " (the residual epilogue)");
      if (!tune_enabled()) n = 1;
      const size_t d_bytes = size_t(p.c.ld) * size_t(p.c.cols) * (call.out_f32 ? 4 : gpu::storage_bytes(st)) +
                             size_t(p.batch - 1) * size_t(p.c.stride) * (call.out_f32 ? 4 : gpu::storage_bytes(st));
      const LtCall k{im.handle, e.desc,  e.a,  e.b, e.c,     &p.alpha,     first,
                     second,    &p.beta, c_in, C,   d_bytes, im.workspace, static_cast<cudaStream_t>(stream)};
      // D is read when it is C and beta is not 0 (an accumulation).
      e.algo = results[split_k(results[0].algo) <= 1 ? fastest(k, p.beta != 0.f && c_in == C, results, n) : 0].algo;
    } catch (...) {
      im.cache.erase(it);  // never keep a half-built entry
      throw;
    }
  } else {  // same alignments (part of the key), new addresses
    if (has_bias) set_desc(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    if (epi == Epilogue::gelu_aux_bias || dgelu) set_desc(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  }
  kprof::count_launch();  // one kernel, as the heuristic's algorithms run (no split-K reduction asked for)
  CUBLAS_CHECK(cublasLtMatmul(im.handle, e.desc, &p.alpha, first, e.a, second, e.b, &p.beta, c_in, e.c, C, e.c, &e.algo,
                              im.workspace, CublasLtContext::kWorkspaceBytes, static_cast<cudaStream_t>(stream)));
}

}  // namespace eng
