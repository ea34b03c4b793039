// linear_residual(x, W, b, r) = r + (x W^T + b): a residual block's output
// projection and its residual add as one op (the bias-and-residual fusion
// Megatron's blocks make). On the cpu, cpu::gemm_bias: each tile of C is
// stored as (r + b) + x W^T by the engine's AVX-512 kernel, or (where that
// does not run) starts as r + b and the OpenBLAS GEMM adds x W^T (beta 1):
// unfused, linear writes C, then add reads C and r and writes the sum, so
// the fused op saves at least a read and a write of the (rows, out)
// activation per call. It rounds r + b first and then adds the product, not
// as linear then add do (the sum in another order).
// emu and cuda: one GEMM whose epilogue adds r and b (Epilogue::
// bias_residual: cuBLASLt's C = r with beta 1 into a separate D, the BIAS
// epilogue), one rounding: unfused, linear writes C and add reads it back
// with r, 3 (rows, out) passes where the GEMM's read of r is one.
// Without a bias (b undefined: a Llama block's projections) the same with
// r alone (Epilogue::residual; cuBLASLt's C = r, beta 1, no epilogue).
// Backward: matmul's for x, W and b (engine/ops/matmul.cpp); r's gradient
// is g itself. With the bias gradients fused (engine/ops.h), b's gradient
// on emu/cuda comes from the backward that finishes g, where that is a
// layernorm's (a pre-LN block's next one: autograd's offered_grad_sums):
// its kernel sums g's columns as it writes g, no pass over g here.
#include "engine/ops/matmul_plan.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/gemm/gemm.h"

namespace eng {
using namespace detail;

Tensor linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
  ENGINE_CHECK(x.defined() && w.defined() && r.defined(), "linear_residual: x, weight and residual must be defined");
  const DType t = b.defined() ? check_float_inputs("linear_residual", {x, w, b, r}, GpuKernel::yes)
                              : check_float_inputs("linear_residual", {x, w, r}, GpuKernel::yes);
  ENGINE_CHECK(w.ndim() == 2, "linear_residual: weight must be (out, in), got ", w.desc());
  ENGINE_CHECK(x.ndim() >= 2 && x.size(-1) == w.size(1), "linear_residual: input ", x.desc(), " does not match weight ",
               w.desc());
  ENGINE_CHECK(!b.defined() || (b.ndim() == 1 && b.size(0) == w.size(0)), "linear_residual: bias ", b.desc(),
               " does not match weight ", w.desc());
  const MatmulDims d = matmul_dims(x, w, Trans::N, Trans::T);
  ENGINE_CHECK(r.shape() == d.out_shape, "linear_residual: residual ", r.desc(), " does not match the output ",
               shape_str(d.out_shape), " of ", x.desc(), " @ ", w.desc(), "^T");
  Tensor out = Tensor::empty(d.out_shape, t, x.device());
  const GemmPlan plan = plan_forward(d, Trans::N, Trans::T);
  ENGINE_CHECK(plan.size() == 1 && plan[0].call.batch == 1, "linear_residual: a shared weight is one GEMM");
  if (on_gpu(x)) {
    run_plan(plan, x, w, Tensor(), out, {.bias = b, .residual = r});
  } else {
    const GemmCall& c = plan[0].call;
    dispatch_float(t, [&]<typename T>() {
      cpu::gemm_bias<T>(c.ta, c.tb, c.M, c.N, c.K, x.data<T>(), c.lda, w.data<T>(), c.ldb,
                        b.defined() ? b.data<T>() : nullptr, r.data<T>(), c.ldc, out.data<T>(), c.ldc);
    });
  }
  const bool rec = needs_record({x, w, b, r});
  Tensor sx = rec ? x.detach() : Tensor(), sw = rec ? w.detach() : Tensor();
  auto offer = on_gpu(x) && rec && b.defined() && b.requires_grad() && bias_grad_mode() == BiasGradMode::fused
                   ? std::make_shared<GradEpilogue>(GradEpilogue{.want_dbias = true})
                   : nullptr;
  record("linear_residual", out, {x, w, b, r}, [sx, sw, d, offer](const Tensor& g, const std::vector<bool>& needs) {
    const bool made = needs[2] && offer && offer->applied && offer->dbias.numel() == d.N;
    std::vector<Tensor> grads =
        matmul_backward(sx, sw, g, d, Trans::N, Trans::T, {needs[0], needs[1], needs[2] && !made});
    if (made) grads[2] = bias_grad_from_sums(offer->dbias, g.dtype(), 2);
    grads.push_back(needs[3] ? g : Tensor());
    return grads;
  });
  if (offer) offer_grad_epilogue(out, offer);
  return out;
}

}  // namespace eng
