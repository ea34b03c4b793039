// gelu, relu and swiglu; each saves its input and recomputes the local
// derivative. gelu_grad (op_common.h) is GELU's backward, shared with linear_gelu.
#include "kernels/cuda/activation.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/swiglu.h"

namespace eng {
using namespace detail;

Tensor gelu(const Tensor& x) {
  const DType t = check_float_inputs("gelu", {x}, GpuKernel::yes);
  Tensor out = empty_like(x);
  if (on_gpu(x))
    ENGINE_GPU_CALL(x.device(), gelu_forward, storage_of(t), x.data_ptr(), out.data_ptr(), x.numel(), nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::gelu_forward(x.data<T>(), out.data<T>(), x.numel()); });
  Tensor sx = needs_record({x}) ? x.detach() : Tensor();
  record("gelu", out, {x},
         [sx](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{gelu_grad(sx, g)}; });
  return out;
}

Tensor detail::gelu_grad(const Tensor& x, const Tensor& g) {
  Tensor dx = empty_like(g);
  if (on_gpu(g))
    ENGINE_GPU_CALL(g.device(), gelu_backward, storage_of(g.dtype()), x.data_ptr(), g.data_ptr(), dx.data_ptr(),
                    g.numel(), nullptr);
  else
    dispatch_float(g.dtype(),
                   [&]<typename T>() { cpu::gelu_backward(x.data<T>(), g.data<T>(), dx.data<T>(), g.numel()); });
  return dx;
}

Tensor relu(const Tensor& x) {
  const DType t = check_float_inputs("relu", {x});
  Tensor out = empty_like(x);
  dispatch_float(t, [&]<typename T>() { cpu::relu_forward(x.data<T>(), out.data<T>(), x.numel()); });
  Tensor sx = needs_record({x}) ? x.detach() : Tensor();
  record("relu", out, {x}, [sx](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(g);
    dispatch_float(g.dtype(),
                   [&]<typename T>() { cpu::relu_backward(sx.data<T>(), g.data<T>(), dx.data<T>(), g.numel()); });
    return std::vector<Tensor>{dx};
  });
  return out;
}

Tensor swiglu(const Tensor& gu) {
  const DType t = check_float_inputs("swiglu", {gu}, GpuKernel::yes);
  ENGINE_CHECK(gu.ndim() >= 1 && gu.size(-1) % 2 == 0, "swiglu: the last dim must be gate | up (even), got ",
               gu.desc());
  const int64_t H = gu.size(-1) / 2, N = gu.numel() / std::max<int64_t>(2 * H, 1);
  Shape shape = gu.shape();
  shape.back() = H;
  Tensor out = Tensor::empty(shape, t, gu.device());
  if (on_gpu(gu))
    ENGINE_GPU_CALL(gu.device(), swiglu_forward, storage_of(t), gu.data_ptr(), out.data_ptr(), N, H, nullptr);
  else
    dispatch_float(t, [&]<typename F>() { cpu::swiglu_forward(gu.data<F>(), out.data<F>(), N, H); });
  Tensor sgu = needs_record({gu}) ? gu.detach() : Tensor();
  record("swiglu", out, {gu}, [sgu, N, H](const Tensor& g, const std::vector<bool>&) {
    Tensor dgu = empty_like(sgu);
    if (on_gpu(g))
      ENGINE_GPU_CALL(g.device(), swiglu_backward, storage_of(g.dtype()), sgu.data_ptr(), g.data_ptr(), dgu.data_ptr(),
                      N, H, nullptr);
    else
      dispatch_float(g.dtype(),
                     [&]<typename F>() { cpu::swiglu_backward(sgu.data<F>(), g.data<F>(), dgu.data<F>(), N, H); });
    return std::vector<Tensor>{dgu};
  });
  return out;
}

}  // namespace eng
