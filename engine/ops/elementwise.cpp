// add, sub, mul, scale and the in-place helpers, with their backward.
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

Tensor add(const Tensor& a, const Tensor& b) {
  const DType t = check_float_inputs("add", {a, b});
  check_same_shape("add", a, b);
  Tensor out = empty_like(a);
  dispatch_float(t, [&]<typename T>() { cpu::add(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
  record("add", out, {a, b}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g, g}; });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  const DType t = check_float_inputs("sub", {a, b});
  check_same_shape("sub", a, b);
  Tensor out = empty_like(a);
  dispatch_float(t, [&]<typename T>() { cpu::sub(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
  record("sub", out, {a, b}, [](const Tensor& g, const std::vector<bool>& needs) {
    return std::vector<Tensor>{g, needs[1] ? scale(g, -1.0) : Tensor()};
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const DType t = check_float_inputs("mul", {a, b});
  check_same_shape("mul", a, b);
  Tensor out = empty_like(a);
  dispatch_float(t, [&]<typename T>() { cpu::mul(a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
  const bool rec = needs_record({a, b});
  Tensor sa = rec ? a.detach() : Tensor(), sb = rec ? b.detach() : Tensor();
  record("mul", out, {a, b}, [sa, sb](const Tensor& g, const std::vector<bool>& needs) {
    return std::vector<Tensor>{needs[0] ? mul(g, sb) : Tensor(), needs[1] ? mul(g, sa) : Tensor()};
  });
  return out;
}

Tensor scale(const Tensor& x, double s) {
  const DType t = check_float_inputs("scale", {x});
  Tensor out = empty_like(x);
  dispatch_float(t, [&]<typename T>() { cpu::scale(x.data<T>(), T(s), out.data<T>(), x.numel()); });
  record("scale", out, {x},
         [s](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{scale(g, s)}; });
  return out;
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  const DType t = check_float_inputs("add_", {dst, src});
  check_same_shape("add_", dst, src);
  dispatch_float(t, [&]<typename T>() { cpu::axpy(dst.data<T>(), src.data<T>(), T(alpha), dst.numel()); });
}

void scale_(Tensor& x, double s) {
  const DType t = check_float_inputs("scale_", {x});
  dispatch_float(t, [&]<typename T>() { cpu::scale(x.data<T>(), T(s), x.data<T>(), x.numel()); });
}

void fill_(Tensor& x, double value) {
  const DType t = check_float_inputs("fill_", {x});
  dispatch_float(t, [&]<typename T>() { cpu::fill(x.data<T>(), T(value), x.numel()); });
}

}  // namespace eng
