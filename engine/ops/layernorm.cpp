// layernorm over the last dim; saves x, mean and rstd (N floats each) for backward.
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  const DType t = check_float_inputs("layernorm", {x, w, b});
  ENGINE_CHECK(x.ndim() >= 1, "layernorm: input must have at least 1 dim, got ", x.desc());
  const int64_t C = x.size(-1), N = x.numel() / std::max<int64_t>(C, 1);
  ENGINE_CHECK(w.shape() == Shape{C} && b.shape() == Shape{C}, "layernorm: weight ", w.desc(), " and bias ", b.desc(),
               " must be (", C, ",) for input ", x.desc());
  Tensor out = empty_like(x);
  Tensor mean = Tensor::empty({N}, t, x.device()), rstd = Tensor::empty({N}, t, x.device());
  dispatch_float(t, [&]<typename T>() {
    cpu::layernorm_forward(x.data<T>(), w.data<T>(), b.data<T>(), out.data<T>(), mean.data<T>(), rstd.data<T>(), N, C,
                           eps);
  });
  const bool rec = needs_record({x, w, b});
  Tensor sx = rec ? x.detach() : Tensor(), sw = rec ? w.detach() : Tensor();
  record("layernorm", out, {x, w, b}, [sx, sw, mean, rstd, N, C](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(sx), dw = empty_like(sw), db = empty_like(sw);
    dispatch_float(g.dtype(), [&]<typename T>() {
      cpu::layernorm_backward(g.data<T>(), sx.data<T>(), sw.data<T>(), mean.data<T>(), rstd.data<T>(), dx.data<T>(),
                              dw.data<T>(), db.data<T>(), N, C);
    });
    return std::vector<Tensor>{dx, dw, db};
  });
  return out;
}

}  // namespace eng
