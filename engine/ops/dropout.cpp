// Dropout with an explicit (seed, offset): no generator state hides in the op,
// so checkpoint's recompute and the backward draw the same mask.
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  ENGINE_CHECK(p >= 0.0 && p < 1.0, "dropout: probability ", p, " outside [0, 1)");
  const DType t = check_float_inputs("dropout", {x});
  if (p == 0.0) return x;
  Tensor out = empty_like(x);
  dispatch_float(t,
                 [&]<typename T>() { cpu::dropout_forward(x.data<T>(), out.data<T>(), x.numel(), p, seed, offset); });
  record("dropout", out, {x}, [p, seed, offset](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(g);
    dispatch_float(g.dtype(),
                   [&]<typename T>() { cpu::dropout_backward(g.data<T>(), dx.data<T>(), g.numel(), p, seed, offset); });
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace eng
