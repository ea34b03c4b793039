// matmul (2-D and batched, either operand transposed, optional bias) and linear.
// For C = op(A) op(B) + bias, with G = dL/dC:
//   dA = G op(B)^T      (stored transposed again when ta = T: dA = op(B) G^T)
//   dB = op(A)^T G      (when tb = T: dB = G^T op(A))
//   dbias = column sums of G
// A shared 2-D B with a batched A is folded into one big GEMM over all rows,
// which is how Linear on (B, T, C) activations becomes a single call.
// Devices: cpu (f32/f64, OpenBLAS); emu (f32/bf16/f16 storage, fp32
// accumulation, the hand-written GEMM of kernels/cuda/gemm.cu); cuda (the
// same storage types through cuBLASLt, kernels/gemm/cublaslt.h, with the
// bias as its epilogue forward and, for a linear layer's weight gradient,
// the bias gradient as the epilogue of the dW GEMM). All three run the same
// GemmCalls (engine/ops/matmul_plan.h). Under set_gemm_impl(GemmImpl::mma),
// emu and cuda run the 16-bit GEMMs our tensor-core kernel takes on it
// (kernels/cuda/gemm_mma.cu, the same epilogues). run_plan and matmul_backward are
// shared with linear_gelu (engine/ops/linear_gelu.cpp), whose forward is the
// same plan with the GELU epilogue.
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "engine/ops/matmul_plan.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/bias_grad.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_mma.h"
#include "kernels/gemm/gemm.h"

#if defined(ENGINE_HAVE_CUDA)
#include "engine/gpu_context.h"
#include "kernels/cuda/activation.h"
#include "kernels/gemm/cublaslt.h"
#endif

namespace eng {
using namespace detail;

namespace detail {
MatmulDims matmul_dims(const Tensor& a, const Tensor& b, Trans ta, Trans tb) {
  ENGINE_CHECK(a.ndim() >= 2 && b.ndim() >= 2, "matmul: need at least 2-D operands, got ", a.desc(), " @ ", b.desc());
  MatmulDims d;
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  d.M = ta == Trans::N ? ar : ac;
  d.K = ta == Trans::N ? ac : ar;
  const int64_t kb = tb == Trans::N ? br : bc;
  d.N = tb == Trans::N ? bc : br;
  ENGINE_CHECK(d.K == kb, "matmul: inner dimensions differ (", d.K, " vs ", kb, "): ", a.desc(),
               ta == Trans::T ? "^T" : "", " @ ", b.desc(), tb == Trans::T ? "^T" : "");
  Shape lead(a.shape().begin(), a.shape().end() - 2);
  d.batch = shape_numel(lead);
  if (b.ndim() == 2) {
    d.shared_b = true;
  } else {
    Shape blead(b.shape().begin(), b.shape().end() - 2);
    ENGINE_CHECK(blead == lead, "matmul: batch dimensions differ: ", a.desc(), " @ ", b.desc());
  }
  d.out_shape = lead;
  d.out_shape.push_back(d.M);
  d.out_shape.push_back(d.N);
  return d;
}

namespace {
Trans flip(Trans t) { return t == Trans::N ? Trans::T : Trans::N; }

// C[batch] = op(X) op(Y) with beta = 0; a shared Y with an untransposed X
// folds the batch into the rows: one (batch*M, K) @ (K, N) GEMM.
GemmStep product(const MatmulDims& d, Trans tx, Trans ty, Operand x, Operand y) {
  GemmCall c;
  c.ta = tx, c.tb = ty, c.N = d.N, c.K = d.K;
  c.lda = tx == Trans::N ? d.K : d.M, c.ldb = ty == Trans::N ? d.N : d.K, c.ldc = d.N;
  if (d.shared_b && tx == Trans::N) {
    c.M = d.batch * d.M;
  } else {
    c.M = d.M, c.batch = d.batch;
    c.stride_a = d.M * d.K, c.stride_b = d.shared_b ? 0 : d.K * d.N, c.stride_c = d.M * d.N;
  }
  return {c, x, y};
}

}  // namespace

GemmPlan plan_forward(const MatmulDims& d, Trans ta, Trans tb) { return {product(d, ta, tb, Operand::a, Operand::b)}; }

// dA (as stored) = G op(B)^T, or op(B) G^T when A was transposed.
GemmPlan plan_grad_a(const MatmulDims& d, Trans ta, Trans tb) {
  if (ta == Trans::N) {
    MatmulDims e = d;
    e.N = d.K, e.K = d.N;
    return {product(e, Trans::N, flip(tb), Operand::g, Operand::b)};
  }
  // (K x M) = op(B) (K x N) @ G^T (N x M): batched, B first (a shared B has
  // stride 0, and cannot fold: the batch would have to be G's columns).
  GemmCall c;
  c.ta = tb, c.tb = Trans::T, c.M = d.K, c.N = d.M, c.K = d.N, c.batch = d.batch;
  c.lda = tb == Trans::N ? d.N : d.K, c.ldb = d.N, c.ldc = d.M;
  c.stride_a = d.shared_b ? 0 : d.K * d.N, c.stride_b = d.M * d.N, c.stride_c = d.M * d.K;
  return {{c, Operand::b, Operand::g}};
}

// dB (K x N) = op(A)^T G, or (N x K) = G^T op(A) when B was transposed. A
// shared B sums over the batch: folded into the reduction (K' = batch*M) when
// A is untransposed, else one GEMM per batch accumulating with beta = 1.
GemmPlan plan_grad_b(const MatmulDims& d, Trans ta, Trans tb) {
  const int64_t lda = ta == Trans::N ? d.K : d.M;
  if (d.shared_b && ta == Trans::N) {
    GemmCall c;
    c.ta = Trans::T, c.tb = Trans::N, c.K = d.batch * d.M;
    if (tb == Trans::N) {
      c.M = d.K, c.N = d.N, c.lda = lda, c.ldb = d.N, c.ldc = d.N;
      return {{c, Operand::a, Operand::g}};
    }
    c.M = d.N, c.N = d.K, c.lda = d.N, c.ldb = lda, c.ldc = d.K;
    return {{c, Operand::g, Operand::a}};
  }
  const int64_t nb = d.shared_b ? 1 : d.batch, inner = d.shared_b ? d.batch : 1;
  GemmPlan plan;
  for (int64_t i = 0; i < inner; ++i) {
    GemmCall c;
    c.K = d.M, c.batch = nb, c.beta = i ? 1.f : 0.f, c.stride_c = d.K * d.N;
    if (tb == Trans::N) {
      c.ta = flip(ta), c.tb = Trans::N, c.M = d.K, c.N = d.N;
      c.lda = lda, c.stride_a = d.M * d.K, c.ldb = d.N, c.stride_b = d.M * d.N, c.ldc = d.N;
      plan.push_back({c, Operand::a, Operand::g, i * d.M * d.K, i * d.M * d.N});
    } else {
      c.ta = Trans::T, c.tb = ta, c.M = d.N, c.N = d.K;
      c.lda = d.N, c.stride_a = d.M * d.N, c.ldb = lda, c.stride_b = d.M * d.K, c.ldc = d.K;
      plan.push_back({c, Operand::g, Operand::a, i * d.M * d.N, i * d.M * d.K});
    }
  }
  return plan;
}

bool bias_grad_fusable(const GemmPlan& grad_b, const MatmulDims& d) {
  if (grad_b.size() != 1) return false;
  const GemmStep& s = grad_b[0];
  return s.first == Operand::g && s.offset_first == 0 && s.call.ta == Trans::T && s.call.batch == 1 &&
         s.call.M == d.N && s.call.K == d.batch * d.M && s.call.lda == d.N;
}
}  // namespace detail

namespace {
#if defined(ENGINE_HAVE_CUDA)
// One plan step on the cuda device through its cuBLASLt context, into `out`
// (a tensor in the plan's storage st, or fp32 for out_f32). `bias` is read
// (bias, gelu_aux_bias, bias_residual) or written (bgrad); `aux` is the
// epilogue's matrix. K = 0 (C = beta C + bias, nothing to multiply) is left
// to the hand-written GEMM, which handles it; cuBLASLt rejects empty
// reductions.
void cublaslt_step(gpu::Storage st, const Tensor& out, const GemmCall& call, const void* x, const void* y,
                   const void* bias, Epilogue epi, void* aux = nullptr) {
  if (call.M == 0 || call.N == 0 || call.batch == 0) return;
  if (call.K == 0) {
    ENGINE_CHECK(epi != Epilogue::bgrad, "matmul: no bias gradient of an empty product");
    cudak::tiled_gemm(st, call, x, y, out.data_ptr(), bias, epi, aux, nullptr);
    return;
  }
  GpuContext& ctx = gpu_context(out.device().index);
  const ComputeMode mode = st == gpu::Storage::f32 ? ctx.f32_gemm_mode : default_compute_mode(st);
  gemm(ctx.cublaslt(), call, st, x, y, out.data_ptr(), bias, epi, aux, mode, gpu::current_stream());
}

// Whether cuBLASLt can read or write this step's GELU aux matrix (kernels/
// gemm/cublaslt.h: ld and batch stride multiples of 8); empty steps trivially can.
bool lt_takes_aux(const GemmCall& c) {
  return c.M == 0 || c.N == 0 || c.K == 0 || c.batch == 0 || lt_aux_ok(plan_cublaslt(c));
}
#endif

// A step profile's name for one GEMM (kernels/kernel_cost.h): its shape, so
// the table shows each class apart (lm_head's unaligned products above all).
std::string gemm_name(const GemmCall& c, Epilogue epi, const kprof::Cost& cost) {
  static const char* const kEpi[] = {
      "",        " +bias",     " +bias+gelu",  " +bias+gelu", " +dbias", " +bias+residual",
      " +dgelu", " +residual", " +dgelu+dbias"};
  return cat("gemm ", c.M, "x", c.N, "x", c.K, c.batch > 1 ? cat(" x", c.batch) : "", kEpi[int(epi)],
             c.out_f32 ? " f32out" : "", cost.aligned ? "" : " unaligned");
}

std::atomic<GemmImpl> g_gemm_impl{GemmImpl::cublaslt};
// -1: not yet read from ENGINE_BIAS_GRAD; else a BiasGradMode.
std::atomic<int> g_bias_grad_mode{-1};
}  // namespace

void set_bias_grad_mode(BiasGradMode mode) { g_bias_grad_mode.store(int(mode)); }
BiasGradMode parse_bias_grad_mode(const std::string& name) {
  for (BiasGradMode m : {BiasGradMode::epilogue, BiasGradMode::apart, BiasGradMode::fused})
    if (name == bias_grad_mode_name(m)) return m;
  ENGINE_USER_FAIL("ENGINE_BIAS_GRAD '", name,
                   "': epilogue (the default: the dW GEMM's), apart (a kernel of its own) or fused (apart, but "
                   "linear_gelu's from the GEMM with GELU's derivative)");
}
const char* bias_grad_mode_name(BiasGradMode mode) {
  return mode == BiasGradMode::apart ? "apart" : mode == BiasGradMode::fused ? "fused" : "epilogue";
}
BiasGradMode bias_grad_mode() {
  int v = g_bias_grad_mode.load();
  if (v < 0) {
    const char* env = std::getenv("ENGINE_BIAS_GRAD");
    v = int(env && *env ? parse_bias_grad_mode(env) : BiasGradMode::epilogue);
    g_bias_grad_mode.store(v);
  }
  return BiasGradMode(v);
}

void set_gemm_impl(GemmImpl impl) { g_gemm_impl.store(impl); }
GemmImpl gemm_impl() { return g_gemm_impl.load(); }
const char* gemm_impl_name(GemmImpl impl) { return impl == GemmImpl::mma ? "mma" : "cublaslt"; }
GemmImpl parse_gemm_impl(const std::string& name) {
  for (GemmImpl i : {GemmImpl::cublaslt, GemmImpl::mma})
    if (name == gemm_impl_name(i)) return i;
  ENGINE_USER_FAIL("gemm '", name, "': cublaslt or mma");
}

namespace detail {
bool wide_output_ok(const GemmPlan& plan, Device dev) {
  if (dev.type == DeviceType::cpu) return false;
  for (const GemmStep& s : plan)
    if (s.call.ta != Trans::T || s.call.tb != Trans::N) return false;
  return !plan.empty();
}

void column_sums_gpu(const Tensor& g, int64_t rows, int64_t cols, void* db, bool db_f32, bool add) {
  const Tensor scratch = Tensor::empty({gpu::bias_grad_scratch_floats(rows, cols)}, DType::f32, g.device());
  ENGINE_GPU_CALL(g.device(), bias_grad, storage_of(g.dtype()), g.data_ptr(), rows, cols, scratch.data<float>(), db,
                  db_f32, add, nullptr);
}

Tensor bias_grad_from_sums(const Tensor& sums, DType dtype, size_t input) {
  if (sums.dtype() == dtype) return sums;
  if (dtype_size(dtype) == 2 && takes_wide_grad(input)) {
    Tensor acc = take_master_grad(input);
    if (!acc.defined()) return sums;
    add_(acc, sums);
    return acc;
  }
  return sums.to(dtype);
}

namespace {
// Set once cuBLASLt has refused a DGELU_BGRAD call (no algorithm): the
// dgelu GEMM and bias_grad from then on.
std::atomic<bool> g_lt_dgelu_bgrad_refused{false};

// Whether cuBLASLt runs this dgelu_bgrad step as one GEMM.
bool lt_dgelu_bgrad_ok([[maybe_unused]] Device dev, [[maybe_unused]] const GemmCall& c, [[maybe_unused]] bool mma) {
#if defined(ENGINE_HAVE_CUDA)
  return dev.type == DeviceType::cuda && !mma && c.M > 0 && c.N > 0 && c.K > 0 && c.batch == 1 && lt_takes_aux(c) &&
         !g_lt_dgelu_bgrad_refused.load();
#else
  return false;
#endif
}

// One GEMM of a plan on emu/cuda, by the executor its call goes to
// (cuBLASLt, our tensor-core GEMM, or the hand-written one), profiled as
// one GEMM whichever runs it.
void run_step(gpu::Storage st, const GemmCall& call, const char* x, const char* y, const Tensor& out, const void* bias,
              Epilogue epi, const Tensor& aux, bool mma) {
  void* aux_p = aux.defined() ? aux.data_ptr() : nullptr;
  kprof::Scope profiled;
  if (kprof::listening()) {
    const kprof::Cost cost = kcost::tiled_gemm(st, call, x, y, out.data_ptr(), bias, epi, aux_p, nullptr);
    profiled.begin(cat(gemm_name(call, epi, cost), mma ? " mma" : "").c_str(), cost);
  }
  if (mma) {
    ENGINE_GPU_CALL(out.device(), gemm_mma, st, call, x, y, out.data_ptr(), bias, epi, aux_p, nullptr);
    return;
  }
#if defined(ENGINE_HAVE_CUDA)
  if (out.device().type == DeviceType::cuda) {
    if (epi == Epilogue::gelu_aux_bias && !lt_takes_aux(call)) {
      // cuBLASLt cannot lay out this aux: the bias epilogue into aux, then GELU.
      cublaslt_step(st, aux, call, x, y, bias, Epilogue::bias);
      cudak::gelu_forward(st, aux.data_ptr(), out.data_ptr(), out.numel(), nullptr);
    } else if (epi == Epilogue::dgelu && !lt_takes_aux(call)) {
      // Nor this one: the product, then GELU's backward over it.
      cublaslt_step(st, out, call, x, y, nullptr, Epilogue::none);
      cudak::gelu_backward(st, aux.data_ptr(), out.data_ptr(), out.data_ptr(), out.numel(), nullptr);
    } else {
      cublaslt_step(st, out, call, x, y, bias, epi, aux_p);
    }
    return;
  }
#endif
  ENGINE_GPU_CALL(out.device(), tiled_gemm, st, call, x, y, out.data_ptr(), bias, epi, aux_p, nullptr);
}
}  // namespace

void run_plan(const GemmPlan& plan, const Tensor& a, const Tensor& b, const Tensor& g, const Tensor& out,
              const PlanEpilogue& e) {
  const bool one_step = plan.size() == 1 && plan[0].call.beta == 0.f;
  ENGINE_CHECK(!e.bias.defined() || one_step, "matmul: a bias needs a one-GEMM plan that overwrites its output");
  ENGINE_CHECK(!e.gelu_pre.defined() || e.bias.defined(), "matmul: the GELU epilogue needs a bias");
  ENGINE_CHECK((!e.residual.defined() && !e.dgelu_pre.defined()) || (one_step && on_gpu(out)),
               "matmul: the residual and GELU-gradient epilogues are one GEMM on emu/cuda");
  // dgelu_pre with dbias is one epilogue: GELU's gradient and its column sums.
  ENGINE_CHECK(int(e.gelu_pre.defined()) + int(e.residual.defined()) + int(e.dgelu_pre.defined()) +
                       int(e.dbias.defined() && !e.dgelu_pre.defined()) <=
                   1,
               "matmul: one epilogue at a time (GELU, residual, GELU gradient or bias gradient)");
  auto pick = [&](Operand o) -> const Tensor& { return o == Operand::a ? a : o == Operand::b ? b : g; };
  const Epilogue epi = e.dbias.defined() && e.dgelu_pre.defined() ? Epilogue::dgelu_bgrad
                       : e.dbias.defined()                        ? Epilogue::bgrad
                       : e.gelu_pre.defined()                     ? Epilogue::gelu_aux_bias
                       : e.residual.defined()  ? (e.bias.defined() ? Epilogue::bias_residual : Epilogue::residual)
                       : e.dgelu_pre.defined() ? Epilogue::dgelu
                       : e.bias.defined()      ? Epilogue::bias
                                               : Epilogue::none;
  const Tensor& aux = e.gelu_pre.defined() ? e.gelu_pre : e.residual.defined() ? e.residual : e.dgelu_pre;
  for (const Tensor* t : {&aux, &e.bias})
    ENGINE_CHECK(!t->defined() || t->dtype() == out.dtype(), "matmul: an epilogue operand ", t->desc(),
                 " is not in the output's dtype ", dtype_name(out.dtype()));
  if (on_gpu(out)) {
    // The operands' storage; the output's is fp32 where a weight gradient is written wide.
    const DType in_t = plan.empty() ? out.dtype() : pick(plan[0].first).dtype();
    const bool wide = out.dtype() != in_t;
    ENGINE_CHECK(!wide || (out.dtype() == DType::f32 && wide_output_ok(plan, out.device()) &&
                           (epi == Epilogue::none || epi == Epilogue::bgrad)),
                 "matmul: an ", dtype_name(out.dtype()), " output of ", dtype_name(in_t),
                 " operands is an fp32 weight gradient (G^T X) only");
    ENGINE_CHECK(!e.dbias.defined() || e.dbias.dtype() == out.dtype(), "matmul: the bias gradient ", e.dbias.desc(),
                 " is not in the output's dtype");
    const gpu::Storage st = storage_of(in_t);
    const size_t es = dtype_size(in_t);
    for (GemmStep s : plan) {
      s.call.out_f32 = wide;
      const char* x = static_cast<const char*>(pick(s.first).data_ptr()) + s.offset_first * int64_t(es);
      const char* y = static_cast<const char*>(pick(s.second).data_ptr()) + s.offset_second * int64_t(es);
      const bool mma = gemm_impl() == GemmImpl::mma && gemm_mma_takes(st, s.call, x, y);
      // dgelu_bgrad is cuBLASLt's alone: elsewhere (emu, ours, an aux it
      // cannot lay out, an empty reduction, a cuBLASLt with no algorithm
      // for it) the dgelu GEMM, then the bias_grad kernel sums what it wrote.
      if (epi == Epilogue::dgelu_bgrad && lt_dgelu_bgrad_ok(out.device(), s.call, mma)) {
        try {
          run_step(st, s.call, x, y, out, e.dbias.data_ptr(), epi, aux, mma);
          continue;
        } catch (const Error& err) {
          // Refused before any launch (the heuristic found no algorithm, or
          // cuBLASLt does not support it): the two kernels from now on, said
          // once. Any other error is the caller's.
          const std::string what = err.what();
          if (what.find("no algorithm") == std::string::npos && what.find("NOT_SUPPORTED") == std::string::npos) throw;
          g_lt_dgelu_bgrad_refused.store(true);
          std::fprintf(stderr, "note: cuBLASLt has no DGELU_BGRAD for this GEMM (%s); its column sums by bias_grad\n",
                       err.what());
        }
      }
      if (epi == Epilogue::dgelu_bgrad) {
        ENGINE_CHECK(s.call.batch == 1 && s.call.ldc == s.call.N && s.call.beta == 0.f,
                     "matmul: GELU's gradient with its column sums needs one whole (M, N) product");
        run_step(st, s.call, x, y, out, nullptr, Epilogue::dgelu, aux, mma);
        column_sums_gpu(out, s.call.M, s.call.N, e.dbias.data_ptr(), e.dbias.dtype() == DType::f32, false);
        continue;
      }
      // bgrad writes dbias through the bias pointer (cuBLASLt's convention).
      const void* bias = epi == Epilogue::bgrad ? e.dbias.data_ptr() : e.bias.defined() ? e.bias.data_ptr() : nullptr;
      run_step(st, s.call, x, y, out, bias, epi, aux, mma);
    }
    return;
  }
  // The cpu: the product (plus bias) goes to gelu_pre when there is one, then
  // GELU into out. The bias is added as each tile of C is stored
  // (cpu::gemm_bias), or, for a batched product, written into C first and the
  // GEMM adds to it (beta 1): no pass over C of its own either way.
  ENGINE_CHECK(!e.dbias.defined(), "matmul: the bias-gradient epilogue runs on emu/cuda");
  dispatch_float(out.dtype(), [&]<typename T>() {
    const Tensor& dst = e.gelu_pre.defined() ? e.gelu_pre : out;
    for (GemmStep s : plan) {
      const T* x = pick(s.first).data<T>() + s.offset_first;
      const T* y = pick(s.second).data<T>() + s.offset_second;
      const GemmCall& c = s.call;
      if (e.bias.defined() && c.batch == 1 && c.alpha == 1.f) {  // a one-step plan (checked above) with beta 0
        cpu::gemm_bias<T>(c.ta, c.tb, c.M, c.N, c.K, x, c.lda, y, c.ldb, e.bias.data<T>(), nullptr, 0, dst.data<T>(),
                          c.ldc);
        continue;
      }
      if (e.bias.defined()) {
        cpu::bias_fill<T>(dst.data<T>(), e.bias.data<T>(), dst.numel() / e.bias.numel(), e.bias.numel());
        s.call.beta = 1.f;
      }
      cpu::gemm_call<T>(s.call, x, y, dst.data<T>());
    }
    if (e.gelu_pre.defined()) cpu::gelu_forward<T>(e.gelu_pre.data<T>(), out.data<T>(), out.numel());
  });
}

std::vector<Tensor> matmul_backward(const Tensor& sa, const Tensor& sb, const Tensor& g, const MatmulDims& d, Trans ta,
                                    Trans tb, const std::vector<bool>& needs, const Tensor& dbias_made) {
  std::vector<Tensor> grads(3);
  if (needs[0]) {
    grads[0] = empty_like(sa);
    const GemmPlan grad_a = plan_grad_a(d, ta, tb);
    // A GELU's derivative offered by A's producer (linear_gelu, whose output
    // this product consumed) is this GEMM's epilogue on emu/cuda: dA comes
    // out as the gradient of the GELU's input, with no pass of its own.
    GradEpilogue* offer = on_gpu(g) && grad_a.size() == 1 ? offered_grad_epilogue(0) : nullptr;
    if (offer && offer->gelu_pre.defined() && offer->gelu_pre.shape() == sa.shape() &&
        offer->gelu_pre.dtype() == sa.dtype()) {
      // With want_dbias it sums dA's columns too, the GELU's layer's bias
      // gradient, where dA is one whole (rows, N) product (a batched one's
      // bias gradient is left to its own backward).
      const GemmCall& c = grad_a[0].call;
      if (offer->want_dbias && c.batch == 1 && c.ldc == c.N && c.beta == 0.f)
        offer->dbias = Tensor::empty({sa.size(-1)}, sa.dtype(), sa.device());
      run_plan(grad_a, sa, sb, g, grads[0], {.dgelu_pre = offer->gelu_pre, .dbias = offer->dbias});
      offer->applied = true;
    } else {
      run_plan(grad_a, sa, sb, g, grads[0]);
    }
  }
  // On emu/cuda, a linear layer's bias gradient comes out of the dW GEMM's
  // epilogue (cuBLASLt's BGRADB; ours on emu) instead of a second pass over G.
  const GemmPlan grad_b = needs[1] ? plan_grad_b(d, ta, tb) : GemmPlan();
  // Or, with the bias gradients apart or fused (engine/ops.h:
  // ENGINE_BIAS_GRAD), by a kernel of its own after the GEMM
  // (kernels/cuda/bias_grad.h), the GEMM without an epilogue; or made
  // already (dbias_made), by the GEMM that made G.
  const bool made = needs[2] && dbias_made.defined();
  if (made) grads[2] = dbias_made;
  const bool apart = needs[2] && !made && on_gpu(g) && bias_grad_mode() != BiasGradMode::epilogue;
  const bool fuse_dbias = !apart && !made && needs[1] && needs[2] && on_gpu(g) && bias_grad_fusable(grad_b, d);
  // Written in fp32 from 16-bit operands when B is a cast of an fp32 master
  // weight (autocast's) that takes it (takes_wide_grad): no cast back after the
  // GEMM. The fused bias gradient is then fp32 too, so its cast must take it.
  const bool wide = needs[1] && dtype_size(g.dtype()) == 2 && takes_wide_grad(1) &&
                    wide_output_ok(grad_b, g.device()) && (!fuse_dbias || takes_wide_grad(2));
  if (needs[2] && !apart && !made)
    grads[2] = Tensor::empty({d.N}, fuse_dbias && wide ? DType::f32 : g.dtype(), g.device());
  if (needs[1]) {
    // Micro-batches after the first add into the master's gradient in the
    // GEMM itself (beta 1: take_master_grad), not by a pass after it.
    grads[1] = wide ? take_master_grad(1) : Tensor();
    GemmPlan plan = grad_b;
    if (grads[1].defined())
      for (GemmStep& st : plan) st.call.beta = 1.f;
    else
      grads[1] = Tensor::empty(sb.shape(), wide ? DType::f32 : sb.dtype(), sb.device());
    run_plan(plan, sa, sb, g, grads[1], {.dbias = fuse_dbias ? grads[2] : Tensor()});
  }
  if (apart) {
    // In fp32 where the bias is autocast's copy of an fp32 master that takes
    // it, added into the master's gradient by a later micro-batch (no add
    // pass after, as the weight's GEMM with beta 1).
    const bool wide_b = dtype_size(g.dtype()) == 2 && takes_wide_grad(2);
    Tensor db = wide_b ? take_master_grad(2) : Tensor();
    const bool add = db.defined();
    if (!add) db = Tensor::empty({d.N}, wide_b ? DType::f32 : g.dtype(), g.device());
    column_sums_gpu(g, d.batch * d.M, d.N, db.data_ptr(), db.dtype() == DType::f32, add);
    grads[2] = db;
  } else if (needs[2] && !fuse_dbias && !made) {
    const Tensor& dbias = grads[2];
    if (on_gpu(g))
      ENGINE_GPU_CALL(g.device(), bias_backward, storage_of(g.dtype()), g.data_ptr(), dbias.data_ptr(), d.batch * d.M,
                      d.N, nullptr);
    else
      dispatch_float(g.dtype(),
                     [&]<typename T>() { cpu::bias_backward<T>(g.data<T>(), dbias.data<T>(), d.batch * d.M, d.N); });
  }
  return grads;
}
}  // namespace detail

Tensor matmul(const Tensor& a, const Tensor& b, Trans ta, Trans tb, const Tensor& bias) {
  const DType t = bias.defined() ? check_float_inputs("matmul", {a, b, bias}, GpuKernel::yes)
                                 : check_float_inputs("matmul", {a, b}, GpuKernel::yes);
  const MatmulDims d = matmul_dims(a, b, ta, tb);
  if (bias.defined())
    ENGINE_CHECK(bias.ndim() == 1 && bias.size(0) == d.N, "matmul: bias ", bias.desc(), " does not match ", d.N,
                 " output columns of ", a.desc(), " @ ", b.desc());
  Tensor out = Tensor::empty(d.out_shape, t, a.device());
  run_plan(plan_forward(d, ta, tb), a, b, Tensor(), out, {.bias = bias});
  const bool rec = needs_record({a, b, bias});
  Tensor sa = rec ? a.detach() : Tensor(), sb = rec ? b.detach() : Tensor();
  record("matmul", out, {a, b, bias}, [sa, sb, ta, tb, d](const Tensor& g, const std::vector<bool>& needs) {
    return matmul_backward(sa, sb, g, d, ta, tb, needs);
  });
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  ENGINE_CHECK(w.ndim() == 2, "linear: weight must be (out, in), got ", w.desc());
  ENGINE_CHECK(x.ndim() >= 1 && x.size(-1) == w.size(1), "linear: input ", x.desc(), " does not match weight ",
               w.desc());
  if (x.ndim() == 1) return matmul(x.reshape({1, x.size(0)}), w, Trans::N, Trans::T, b).reshape({w.size(0)});
  return matmul(x, w, Trans::N, Trans::T, b);
}

}  // namespace eng
