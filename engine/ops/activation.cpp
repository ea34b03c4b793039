// gelu and relu; both save their input and recompute the local derivative.
// gelu_grad (op_common.h) is GELU's backward, shared with linear_gelu.
#include "kernels/cuda/activation.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

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

}  // namespace eng
