// add, sub, mul, scale, add_bias and the in-place helpers, with their backward.
// cpu tensors run kernels/cpu/elementwise.cpp (f32/f64); emu and cuda tensors
// run kernels/cuda/elementwise.cu (f32/bf16/f16, fp32 math).
#include "kernels/cuda/elementwise.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/gemm.h"

namespace eng {
using namespace detail;

Tensor add(const Tensor& a, const Tensor& b) {
  const DType t = check_float_inputs("add", {a, b}, GpuKernel::yes);
  check_same_shape("add", a, b);
  Tensor out = empty_like(a);
  if (on_gpu(a))
    ENGINE_GPU_CALL(a.device(), add_forward, storage_of(t), a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(),
                    nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::add(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
  record("add", out, {a, b}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g, g}; });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  const DType t = check_float_inputs("sub", {a, b}, GpuKernel::yes);
  check_same_shape("sub", a, b);
  Tensor out = empty_like(a);
  if (on_gpu(a))
    ENGINE_GPU_CALL(a.device(), sub_forward, storage_of(t), a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(),
                    nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::sub(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
  record("sub", out, {a, b}, [](const Tensor& g, const std::vector<bool>& needs) {
    return std::vector<Tensor>{g, needs[1] ? scale(g, -1.0) : Tensor()};
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const DType t = check_float_inputs("mul", {a, b}, GpuKernel::yes);
  check_same_shape("mul", a, b);
  Tensor out = empty_like(a);
  if (on_gpu(a))
    ENGINE_GPU_CALL(a.device(), mul_forward, storage_of(t), a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(),
                    nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::mul(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
  const bool rec = needs_record({a, b});
  Tensor sa = rec ? a.detach() : Tensor(), sb = rec ? b.detach() : Tensor();
  record("mul", out, {a, b}, [sa, sb](const Tensor& g, const std::vector<bool>& needs) {
    return std::vector<Tensor>{needs[0] ? mul(g, sb) : Tensor(), needs[1] ? mul(g, sa) : Tensor()};
  });
  return out;
}

Tensor scale(const Tensor& x, double s) {
  const DType t = check_float_inputs("scale", {x}, GpuKernel::yes);
  Tensor out = empty_like(x);
  if (on_gpu(x))
    ENGINE_GPU_CALL(x.device(), scale_forward, storage_of(t), x.data_ptr(), float(s), out.data_ptr(), x.numel(),
                    nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::scale(x.data<T>(), T(s), out.data<T>(), x.numel()); });
  record("scale", out, {x},
         [s](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{scale(g, s)}; });
  return out;
}

Tensor add_bias(const Tensor& x, const Tensor& b) {
  const DType t = check_float_inputs("add_bias", {x, b}, GpuKernel::yes);
  ENGINE_CHECK(x.ndim() >= 1 && b.ndim() == 1 && b.size(0) == x.size(-1), "add_bias: bias ", b.desc(),
               " does not match the last dim of ", x.desc());
  const int64_t cols = b.numel(), rows = cols ? x.numel() / cols : 0;
  Tensor out = empty_like(x);
  if (on_gpu(x)) {
    ENGINE_GPU_CALL(x.device(), bias_add_forward, storage_of(t), x.data_ptr(), b.data_ptr(), out.data_ptr(), rows, cols,
                    nullptr);
  } else {
    out.copy_from(x);
    dispatch_float(t, [&]<typename T>() { cpu::bias_add(out.data<T>(), b.data<T>(), rows, cols); });
  }
  record("add_bias", out, {x, b}, [rows, cols](const Tensor& g, const std::vector<bool>& needs) {
    Tensor db;
    if (needs[1]) {
      db = Tensor::empty({cols}, g.dtype(), g.device());
      if (on_gpu(g))
        ENGINE_GPU_CALL(g.device(), bias_backward, storage_of(g.dtype()), g.data_ptr(), db.data_ptr(), rows, cols,
                        nullptr);
      else
        dispatch_float(g.dtype(), [&]<typename T>() { cpu::bias_backward<T>(g.data<T>(), db.data<T>(), rows, cols); });
    }
    return std::vector<Tensor>{g, db};
  });
  return out;
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  const DType t = check_float_inputs("add_", {dst, src}, GpuKernel::yes);
  check_same_shape("add_", dst, src);
  if (on_gpu(dst))
    ENGINE_GPU_CALL(dst.device(), axpy_inplace, storage_of(t), dst.data_ptr(), src.data_ptr(), float(alpha),
                    dst.numel(), nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::axpy(dst.data<T>(), src.data<T>(), T(alpha), dst.numel()); });
}

void scale_(Tensor& x, double s) {
  const DType t = check_float_inputs("scale_", {x}, GpuKernel::yes);
  if (on_gpu(x))
    ENGINE_GPU_CALL(x.device(), scale_forward, storage_of(t), x.data_ptr(), float(s), x.data_ptr(), x.numel(), nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::scale(x.data<T>(), T(s), x.data<T>(), x.numel()); });
}

void fill_(Tensor& x, double value) {
  const DType t = check_float_inputs("fill_", {x}, GpuKernel::yes);
  if (on_gpu(x))
    ENGINE_GPU_CALL(x.device(), fill_inplace, storage_of(t), x.data_ptr(), float(value), x.numel(), nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::fill(x.data<T>(), T(value), x.numel()); });
}

}  // namespace eng
