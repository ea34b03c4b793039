// softmax over the last dim (optional causal mask); backward uses the saved
// output. On emu/cuda: kernels/cuda/softmax.cu; on the cpu: kernels/cpu/softmax.cpp.
#include <algorithm>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/softmax.h"

namespace eng {
using namespace detail;

Tensor softmax(const Tensor& x, Causal causal) {
  const DType t = check_float_inputs("softmax", {x}, GpuKernel::yes);
  ENGINE_CHECK(x.ndim() >= 1, "softmax: input must have at least 1 dim, got ", x.desc());
  const int64_t C = x.size(-1), rows = x.numel() / std::max<int64_t>(C, 1);
  if (causal == Causal::yes)
    ENGINE_CHECK(x.ndim() >= 2 && x.size(-2) == C, "softmax: causal mask needs (..., T, T), got ", x.desc());
  Tensor y = empty_like(x);
  if (on_gpu(x)) {
    const gpu::SoftmaxMask mask = causal == Causal::yes ? gpu::SoftmaxMask::causal : gpu::SoftmaxMask::none;
    ENGINE_GPU_CALL(x.device(), softmax_forward, storage_of(t), x.data_ptr(), y.data_ptr(), rows, C, mask, nullptr);
  } else {
    dispatch_float(
        t, [&]<typename T>() { cpu::softmax_forward(x.data<T>(), y.data<T>(), rows, C, causal == Causal::yes); });
  }
  Tensor sy = needs_record({x}) ? y.detach() : Tensor();
  record("softmax", y, {x}, [sy, rows, C](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(g);
    if (on_gpu(g))
      ENGINE_GPU_CALL(g.device(), softmax_backward, storage_of(g.dtype()), sy.data_ptr(), g.data_ptr(), dx.data_ptr(),
                      rows, C, nullptr);
    else
      dispatch_float(g.dtype(),
                     [&]<typename T>() { cpu::softmax_backward(sy.data<T>(), g.data<T>(), dx.data<T>(), rows, C); });
    return std::vector<Tensor>{dx};
  });
  return y;
}

}  // namespace eng
