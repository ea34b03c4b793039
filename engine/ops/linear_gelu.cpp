// linear_gelu(x, W, b) = gelu(x W^T + b), GPT-2's c_fc + GELU as one op: the
// GELU is the GEMM's epilogue (Epilogue::gelu_aux_bias, kernels/gemm/gemm.h),
// which also stores the pre-activation p = x W^T + b that the backward needs.
// Unfused, GELU reads p back and writes gelu(p): one read and one write of the
// (rows, 4C) activation saved. Backward: dp = gelu'(p) * g (gelu_grad), then
// matmul's backward with dp (dx, dW, db): the plans and backward of
// engine/ops/matmul.cpp, not copies of them. On emu/cuda, when out's only
// consumer is a product whose input gradient is one GEMM (the next linear
// layer), that GEMM computes dp itself (the dgelu epilogue: cuBLASLt's
// DGELU), and the backward here starts from it: one pass over (rows, 4C)
// fewer.
// Devices: emu (the hand-written GEMM's epilogue; GELU from the pre-activation
// rounded to the storage type, so equal bit for bit to linear then gelu),
// cuda (cuBLASLt's GELU_AUX_BIAS, or bias then GELU where cuBLASLt cannot lay
// out the aux), cpu (the bias written into p, an OpenBLAS GEMM adding to it,
// then cpu::gelu_forward).
#include "engine/ops/matmul_plan.h"
#include "engine/ops/op_common.h"

namespace eng {
using namespace detail;

Tensor linear_gelu(const Tensor& x, const Tensor& w, const Tensor& b) {
  ENGINE_CHECK(x.defined() && w.defined() && b.defined(), "linear_gelu: x, weight and bias must all be defined");
  const DType t = check_float_inputs("linear_gelu", {x, w, b}, GpuKernel::yes);
  ENGINE_CHECK(w.ndim() == 2, "linear_gelu: weight must be (out, in), got ", w.desc());
  ENGINE_CHECK(x.ndim() >= 1 && x.size(-1) == w.size(1), "linear_gelu: input ", x.desc(), " does not match weight ",
               w.desc());
  ENGINE_CHECK(b.ndim() == 1 && b.size(0) == w.size(0), "linear_gelu: bias ", b.desc(), " does not match weight ",
               w.desc());
  if (x.ndim() == 1) return linear_gelu(x.reshape({1, x.size(0)}), w, b).reshape({w.size(0)});
  const MatmulDims d = matmul_dims(x, w, Trans::N, Trans::T);
  Tensor out = Tensor::empty(d.out_shape, t, x.device());
  Tensor pre = Tensor::empty(d.out_shape, t, x.device());
  run_plan(plan_forward(d, Trans::N, Trans::T), x, w, Tensor(), out, {.bias = b, .gelu_pre = pre});
  const bool rec = needs_record({x, w, b});
  Tensor sx = rec ? x.detach() : Tensor(), sw = rec ? w.detach() : Tensor(), sp = rec ? pre : Tensor();
  // On emu/cuda the GEMM that computes out's gradient (the next layer's
  // input gradient) may apply GELU's derivative in its epilogue (autograd's
  // GradEpilogue, cuBLASLt's DGELU): g then arrives as dp already.
  // With the bias gradients fused (engine/ops.h), that GEMM also sums dp's
  // columns: b's gradient, then not made again here.
  auto offer = on_gpu(x) && rec
                   ? std::make_shared<GradEpilogue>(GradEpilogue{
                         .gelu_pre = sp, .want_dbias = b.requires_grad() && bias_grad_mode() == BiasGradMode::fused})
                   : nullptr;
  record("linear_gelu", out, {x, w, b}, [sx, sw, sp, d, offer](const Tensor& g, const std::vector<bool>& needs) {
    const bool applied = offer && offer->applied;
    const Tensor dp = applied ? g : gelu_grad(sp, g);
    return matmul_backward(sx, sw, dp, d, Trans::N, Trans::T, needs, applied ? offer->dbias : Tensor());
  });
  if (offer) offer_grad_epilogue(out, offer);
  return out;
}

}  // namespace eng
