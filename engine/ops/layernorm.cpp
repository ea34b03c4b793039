// layernorm over the last dim, and add_layernorm (the residual add fused with
// the layernorm that follows it). Both save x (or the sum), mean and rstd for
// backward: per row, in the input's dtype on the cpu, in fp32 on emu/cuda.
// On emu/cuda the backward also adds x's pending gradient (the residual
// stream's) into dx in its kernel, and sums dx's columns where x's producer
// (linear_residual) offers to take them as its bias gradient.
// On emu/cuda: kernels/cuda/layernorm.cu and layernorm_backward.cu; on the cpu: kernels/cpu/layernorm.cpp.
#include <algorithm>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/layernorm.h"

namespace eng {
using namespace detail;

namespace {

// (N, C) of a layernorm input, after checking w and b are (C).
std::pair<int64_t, int64_t> layernorm_rows(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  ENGINE_CHECK(x.ndim() >= 1, op, ": input must have at least 1 dim, got ", x.desc());
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  ENGINE_CHECK(w.shape() == Shape{C} && b.shape() == Shape{C}, op, ": weight ", w.desc(), " and bias ", b.desc(),
               " must be (", C, ",) for input ", x.desc());
  return {N, C};
}

// Records out = layernorm(x, w, b) given the saved statistics; the backward
// returns (dx, dw, db).
void record_layernorm(const char* name, Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                      const Tensor& mean, const Tensor& rstd, int64_t N, int64_t C) {
  const bool rec = needs_record({x, w, b});
  Tensor sx = rec ? x.detach() : Tensor(), sw = rec ? w.detach() : Tensor();
  record(name, out, {x, w, b}, [sx, sw, mean, rstd, N, C](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(sx), dw, db;
    if (on_gpu(g)) {
      // The gradient x's producer already holds (the residual stream's, from
      // the residual add's other branch) is added in the kernel: dx is then
      // x's whole gradient (take_pending_grad), no in-place add after.
      const Tensor dres = take_pending_grad(0);
      // dw and db in fp32 when w and b are autocast's copies of fp32 masters
      // (takes_wide_grad): no casts back after the kernel; added into the
      // masters' gradients when they hold some (take_master_grad: a later
      // micro-batch), with no add after.
      const bool wide = dtype_size(sw.dtype()) == 2 && takes_wide_grad(1) && takes_wide_grad(2);
      gpu::ParamGrads mode = wide ? gpu::ParamGrads::f32 : gpu::ParamGrads::storage;
      if (wide && master_grad_available(1) && master_grad_available(2)) {  // both or neither
        dw = take_master_grad(1), db = take_master_grad(2);
        mode = gpu::ParamGrads::f32_add;
      }
      if (mode != gpu::ParamGrads::f32_add) {
        dw = Tensor::empty(sw.shape(), wide ? DType::f32 : sw.dtype(), g.device());
        db = Tensor::empty(sw.shape(), wide ? DType::f32 : sw.dtype(), g.device());
      }
      // dx is then x's whole gradient: where x's producer asks for its column
      // sums (linear_residual's bias gradient, with the bias gradients fused:
      // engine/ops.h), the kernel sums dx as it stores it, and the producer
      // makes no pass over it of its own.
      GradEpilogue* sums = C <= gpu::kLayernormBackwardMaxCSums ? offered_grad_sums(0) : nullptr;
      Tensor dx_sums = sums ? Tensor::empty({C}, DType::f32, g.device()) : Tensor();
      Tensor scratch =
          Tensor::empty({gpu::layernorm_backward_scratch_floats(N, C, sums != nullptr)}, DType::f32, g.device());
      ENGINE_GPU_CALL(g.device(), fused_residual_layernorm_backward, storage_of(g.dtype()), g.data_ptr(), sx.data_ptr(),
                      sw.data_ptr(), mean.data<float>(), rstd.data<float>(), dres.defined() ? dres.data_ptr() : nullptr,
                      dx.data_ptr(), dw.data_ptr(), db.data_ptr(), sums ? dx_sums.data<float>() : nullptr, mode,
                      scratch.data<float>(), N, C, nullptr);
      if (sums) {
        sums->dbias = dx_sums;
        sums->applied = true;
      }
    } else {
      dw = empty_like(sw), db = empty_like(sw);
      dispatch_float(g.dtype(), [&]<typename T>() {
        cpu::layernorm_backward(g.data<T>(), sx.data<T>(), sw.data<T>(), mean.data<T>(), rstd.data<T>(), dx.data<T>(),
                                dw.data<T>(), db.data<T>(), N, C);
      });
    }
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const DType t = check_float_inputs("layernorm", {x, w, b}, GpuKernel::yes);
  const auto [N, C] = layernorm_rows("layernorm", x, w, b);
  Tensor out = empty_like(x);
  const DType stat_t = on_gpu(x) ? DType::f32 : t;
  Tensor mean = Tensor::empty({N}, stat_t, x.device()), rstd = Tensor::empty({N}, stat_t, x.device());
  if (on_gpu(x)) {
    ENGINE_GPU_CALL(x.device(), layernorm_forward, storage_of(t), x.data_ptr(), w.data_ptr(), b.data_ptr(),
                    out.data_ptr(), mean.data<float>(), rstd.data<float>(), N, C, eps, nullptr);
  } else {
    dispatch_float(t, [&]<typename T>() {
      cpu::layernorm_forward(x.data<T>(), w.data<T>(), b.data<T>(), out.data<T>(), mean.data<T>(), rstd.data<T>(), N, C,
                             eps);
    });
  }
  record_layernorm("layernorm", out, x, w, b, mean, rstd, N, C);
  return out;
}

std::pair<Tensor, Tensor> add_layernorm(const Tensor& x, const Tensor& r, const Tensor& w, const Tensor& b,
                                        double eps) {
  const DType t = check_float_inputs("add_layernorm", {x, r, w, b}, GpuKernel::yes);
  check_same_shape("add_layernorm", x, r);
  // The cpu reference is the composition; the graph is the same either way.
  if (!on_gpu(x)) {
    Tensor sum = add(x, r);
    return {sum, layernorm(sum, w, b, eps)};
  }
  const auto [N, C] = layernorm_rows("add_layernorm", x, w, b);
  Tensor sum = empty_like(x), normed = empty_like(x);
  Tensor mean = Tensor::empty({N}, DType::f32, x.device()), rstd = Tensor::empty({N}, DType::f32, x.device());
  ENGINE_GPU_CALL(x.device(), fused_residual_layernorm_forward, storage_of(t), x.data_ptr(), r.data_ptr(), w.data_ptr(),
                  b.data_ptr(), sum.data_ptr(), normed.data_ptr(), mean.data<float>(), rstd.data<float>(), N, C, eps,
                  nullptr);
  // Two nodes, as the unfused graph has: sum's gradient is the sum of the
  // caller's d_sum and the layernorm backward's dx (autograd adds them), and
  // reaches both x and r.
  record("add_layernorm.add", sum, {x, r}, [](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g, g};
  });
  record_layernorm("add_layernorm.layernorm", normed, sum, w, b, mean, rstd, N, C);
  return {sum, normed};
}

}  // namespace eng
