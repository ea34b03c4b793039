// sum and mean, over everything or along one dim; backward broadcasts back.
// Along one dim, emu and cuda run kernels/cuda/reduce.cu; over everything,
// the cpu only (the result is read on the host).
#include "kernels/cuda/reduce.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

static Tensor reduce_all(const Tensor& x, bool is_mean) {
  const char* op = is_mean ? "mean" : "sum";
  const DType t = check_float_inputs(op, {x});
  double s = 0;
  dispatch_float(t, [&]<typename T>() { s = cpu::sum_all(x.data<T>(), x.numel()); });
  const double div = is_mean ? double(std::max<int64_t>(x.numel(), 1)) : 1.0;
  Tensor out = Tensor::full({}, s / div, t, x.device());
  const Shape shape = x.shape();
  record(op, out, {x}, [shape, div](const Tensor& g, const std::vector<bool>&) {
    // Read g as double: item() rounds to float, which would cap f64 gradients at f32 precision.
    return std::vector<Tensor>{Tensor::full(shape, g.to_f64_vector()[0] / div, g.dtype(), g.device())};
  });
  return out;
}

static Tensor reduce_dim(const Tensor& x, int dim, bool keepdim, bool is_mean) {
  const char* op = is_mean ? "mean" : "sum";
  const DType t = check_float_inputs(op, {x}, GpuKernel::yes);
  const int d = norm_dim(op, dim, x.ndim());
  const int64_t outer = shape_numel(Shape(x.shape().begin(), x.shape().begin() + d));
  const int64_t n = x.size(d);
  const int64_t inner = shape_numel(Shape(x.shape().begin() + d + 1, x.shape().end()));
  Shape os = x.shape();
  if (keepdim)
    os[size_t(d)] = 1;
  else
    os.erase(os.begin() + d);
  Tensor out = Tensor::empty(os, t, x.device());
  const double alpha = is_mean ? 1.0 / double(std::max<int64_t>(n, 1)) : 1.0;
  if (on_gpu(x)) {
    ENGINE_GPU_CALL(x.device(), sum_dim, storage_of(t), x.data_ptr(), out.data_ptr(), outer, n, inner, float(alpha),
                    nullptr);
    const Shape shape = x.shape();
    record(op, out, {x}, [shape, outer, n, inner, alpha](const Tensor& g, const std::vector<bool>&) {
      Tensor dx = Tensor::empty(shape, g.dtype(), g.device());
      ENGINE_GPU_CALL(g.device(), broadcast_dim, storage_of(g.dtype()), g.data_ptr(), dx.data_ptr(), float(alpha),
                      outer, n, inner, nullptr);
      return std::vector<Tensor>{dx};
    });
    return out;
  }
  dispatch_float(t, [&]<typename T>() {
    cpu::sum_dim(x.data<T>(), out.data<T>(), outer, n, inner);
    if (is_mean) cpu::scale(out.data<T>(), T(alpha), out.data<T>(), out.numel());
  });
  const Shape shape = x.shape();
  record(op, out, {x}, [shape, outer, n, inner, alpha](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = Tensor::empty(shape, g.dtype(), g.device());
    dispatch_float(g.dtype(),
                   [&]<typename T>() { cpu::broadcast_dim(g.data<T>(), dx.data<T>(), T(alpha), outer, n, inner); });
    return std::vector<Tensor>{dx};
  });
  return out;
}

Tensor sum(const Tensor& x) { return reduce_all(x, false); }
Tensor mean(const Tensor& x) { return reduce_all(x, true); }
Tensor sum(const Tensor& x, int dim, bool keepdim) { return reduce_dim(x, dim, keepdim, false); }
Tensor mean(const Tensor& x, int dim, bool keepdim) { return reduce_dim(x, dim, keepdim, true); }

}  // namespace eng
