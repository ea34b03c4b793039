// rmsnorm over the last dim, and add_rmsnorm (the residual add fused with
// the rmsnorm that follows it): Llama's norms. Both save x (or the sum) and
// rstd for backward, per row in the input's dtype on the cpu, in fp32 on
// emu/cuda, where the backward also adds x's pending gradient (the residual
// stream's) into dx in its kernel, as layernorm's does (engine/ops/layernorm.cpp).
// On emu/cuda: kernels/cuda/layernorm.cu and layernorm_backward.cu (their kRms kernels); on the cpu:
// kernels/cpu/rmsnorm.cpp.
#include <algorithm>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/layernorm.h"

namespace eng {
using namespace detail;

namespace {

std::pair<int64_t, int64_t> rmsnorm_rows(const char* op, const Tensor& x, const Tensor& w) {
  ENGINE_CHECK(x.ndim() >= 1, op, ": input must have at least 1 dim, got ", x.desc());
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  ENGINE_CHECK(w.shape() == Shape{C}, op, ": weight ", w.desc(), " must be (", C, ",) for input ", x.desc());
  return {N, C};
}

// Records out = rmsnorm(x, w) given the saved rstd; the backward returns (dx, dw).
void record_rmsnorm(const char* name, Tensor& out, const Tensor& x, const Tensor& w, const Tensor& rstd, int64_t N,
                    int64_t C) {
  const bool rec = needs_record({x, w});
  Tensor sx = rec ? x.detach() : Tensor(), sw = rec ? w.detach() : Tensor();
  record(name, out, {x, w}, [sx, sw, rstd, N, C](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(sx), dw;
    if (on_gpu(g)) {
      // As layernorm's backward: the residual stream's pending gradient added
      // in the kernel, dw in fp32 for autocast's copies of fp32 masters (and
      // added into the master's gradient when it holds one).
      const Tensor dres = take_pending_grad(0);
      const bool wide = dtype_size(sw.dtype()) == 2 && takes_wide_grad(1);
      gpu::ParamGrads mode = wide ? gpu::ParamGrads::f32 : gpu::ParamGrads::storage;
      if (wide && master_grad_available(1)) {
        dw = take_master_grad(1);
        mode = gpu::ParamGrads::f32_add;
      } else {
        dw = Tensor::empty(sw.shape(), wide ? DType::f32 : sw.dtype(), g.device());
      }
      Tensor scratch = Tensor::empty({gpu::layernorm_backward_scratch_floats(N, C)}, DType::f32, g.device());
      ENGINE_GPU_CALL(g.device(), fused_residual_rmsnorm_backward, storage_of(g.dtype()), g.data_ptr(), sx.data_ptr(),
                      sw.data_ptr(), rstd.data<float>(), dres.defined() ? dres.data_ptr() : nullptr, dx.data_ptr(),
                      dw.data_ptr(), mode, scratch.data<float>(), N, C, nullptr);
    } else {
      dw = empty_like(sw);
      dispatch_float(g.dtype(), [&]<typename T>() {
        cpu::rmsnorm_backward(g.data<T>(), sx.data<T>(), sw.data<T>(), rstd.data<T>(), dx.data<T>(), dw.data<T>(), N,
                              C);
      });
    }
    return std::vector<Tensor>{dx, dw};
  });
}

}  // namespace

Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  const DType t = check_float_inputs("rmsnorm", {x, w}, GpuKernel::yes);
  const auto [N, C] = rmsnorm_rows("rmsnorm", x, w);
  Tensor out = empty_like(x);
  Tensor rstd = Tensor::empty({N}, on_gpu(x) ? DType::f32 : t, x.device());
  if (on_gpu(x)) {
    ENGINE_GPU_CALL(x.device(), rmsnorm_forward, storage_of(t), x.data_ptr(), w.data_ptr(), out.data_ptr(),
                    rstd.data<float>(), N, C, eps, nullptr);
  } else {
    dispatch_float(t, [&]<typename T>() {
      cpu::rmsnorm_forward(x.data<T>(), w.data<T>(), out.data<T>(), rstd.data<T>(), N, C, eps);
    });
  }
  record_rmsnorm("rmsnorm", out, x, w, rstd, N, C);
  return out;
}

std::pair<Tensor, Tensor> add_rmsnorm(const Tensor& x, const Tensor& r, const Tensor& w, double eps) {
  const DType t = check_float_inputs("add_rmsnorm", {x, r, w}, GpuKernel::yes);
  check_same_shape("add_rmsnorm", x, r);
  if (!on_gpu(x)) {  // the cpu reference is the composition; the graph is the same either way
    Tensor sum = add(x, r);
    return {sum, rmsnorm(sum, w, eps)};
  }
  const auto [N, C] = rmsnorm_rows("add_rmsnorm", x, w);
  Tensor sum = empty_like(x), normed = empty_like(x);
  Tensor rstd = Tensor::empty({N}, DType::f32, x.device());
  ENGINE_GPU_CALL(x.device(), fused_residual_rmsnorm_forward, storage_of(t), x.data_ptr(), r.data_ptr(), w.data_ptr(),
                  sum.data_ptr(), normed.data_ptr(), rstd.data<float>(), N, C, eps, nullptr);
  // Two nodes, as add_layernorm's: sum's gradient reaches both x and r.
  record("add_rmsnorm.add", sum, {x, r}, [](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g, g};
  });
  record_rmsnorm("add_rmsnorm.rmsnorm", normed, sum, w, rstd, N, C);
  return {sum, normed};
}

}  // namespace eng
