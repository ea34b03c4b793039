// permute, transpose, concat, split, narrow and pad_rows: explicit copies (tensors stay
// contiguous, as in llm.c), each with the inverse copy as its backward.
// permute (and so transpose) also runs on emu/cuda (kernels/cuda/permute.cu),
// and so do concat, split and narrow (kernels/cuda/concat.cu).
#include <cstring>
#include <numeric>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/concat.h"
#include "kernels/cuda/permute.h"

namespace eng {
using namespace detail;

namespace {
// dst[dst_off + r * dst_stride + c] = src[src_off + r * src_stride + c] for
// r < rows, c < cols (offsets and strides in elements), on src's device.
void copy_rows(const Tensor& src, int64_t src_off, int64_t src_stride, const Tensor& dst, int64_t dst_off,
               int64_t dst_stride, int64_t rows, int64_t cols) {
  if (on_gpu(src)) {
    const size_t es = dtype_size(src.dtype());
    ENGINE_GPU_CALL(src.device(), copy_rows, storage_of(src.dtype()),
                    static_cast<const char*>(src.data_ptr()) + size_t(src_off) * es, src_stride,
                    static_cast<char*>(dst.data_ptr()) + size_t(dst_off) * es, dst_stride, rows, cols, nullptr);
    return;
  }
  dispatch_float(src.dtype(), [&]<typename T>() {
    cpu::copy_rows(src.data<T>() + src_off, src_stride, dst.data<T>() + dst_off, dst_stride, rows, cols);
  });
}
}  // namespace

Tensor permute(const Tensor& x, const std::vector<int>& dims) {
  const DType t = check_float_inputs("permute", {x}, GpuKernel::yes);
  const int nd = x.ndim();
  ENGINE_CHECK(int(dims.size()) == nd && nd <= 8, "permute: ", dims.size(), " dims given for ", x.desc());
  std::vector<int> d(dims.size()), seen(size_t(nd), 0);
  for (int i = 0; i < nd; ++i) {
    d[size_t(i)] = norm_dim("permute", dims[size_t(i)], nd);
    ENGINE_CHECK(!seen[size_t(d[size_t(i)])]++, "permute: dim ", dims[size_t(i)], " repeated for ", x.desc());
  }
  Shape os(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) os[size_t(i)] = x.size(d[size_t(i)]);
  Tensor out = Tensor::empty(os, t, x.device());
  if (on_gpu(x))
    ENGINE_GPU_CALL(x.device(), permute_forward, storage_of(t), x.data_ptr(), out.data_ptr(), x.shape().data(),
                    d.data(), nd, nullptr);
  else
    dispatch_float(t, [&]<typename T>() { cpu::permute(x.data<T>(), out.data<T>(), x.shape().data(), d.data(), nd); });
  std::vector<int> inv(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) inv[size_t(d[size_t(i)])] = i;
  record("permute", out, {x},
         [inv](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{permute(g, inv)}; });
  return out;
}

Tensor transpose(const Tensor& x, int d0, int d1) {
  std::vector<int> dims(size_t(x.ndim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(norm_dim("transpose", d0, x.ndim()))], dims[size_t(norm_dim("transpose", d1, x.ndim()))]);
  return permute(x, dims);
}

Tensor concat(const std::vector<Tensor>& xs, int dim) {
  ENGINE_CHECK(!xs.empty(), "concat: no tensors given");
  const DType t = check_float_inputs("concat", xs, GpuKernel::yes);
  const int nd = xs[0].ndim();
  const int d = norm_dim("concat", dim, nd);
  Shape os = xs[0].shape();
  os[size_t(d)] = 0;
  for (const Tensor& x : xs) {
    ENGINE_CHECK(x.ndim() == nd, "concat: ranks differ: ", descs(xs));
    for (int i = 0; i < nd; ++i)
      ENGINE_CHECK(i == d || x.size(i) == xs[0].size(i), "concat: shapes differ outside dim ", dim, ": ", descs(xs));
    os[size_t(d)] += x.size(d);
  }
  Tensor out = Tensor::empty(os, t, xs[0].device());
  const int64_t outer = shape_numel(Shape(os.begin(), os.begin() + d));
  const int64_t inner = shape_numel(Shape(os.begin() + d + 1, os.end()));
  std::vector<int64_t> sizes;
  int64_t col = 0;
  for (const Tensor& x : xs) {
    const int64_t cols = x.size(d) * inner;
    copy_rows(x, 0, cols, out, col, os[size_t(d)] * inner, outer, cols);
    col += cols;
    sizes.push_back(x.size(d));
  }
  record("concat", out, xs, [sizes, d](const Tensor& g, const std::vector<bool>&) { return split(g, sizes, d); });
  return out;
}

Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length) {
  const DType t = check_float_inputs("narrow", {x}, GpuKernel::yes);
  const int d = norm_dim("narrow", dim, x.ndim());
  ENGINE_CHECK(start >= 0 && length >= 0 && start + length <= x.size(d), "narrow: [", start, ", ", start + length,
               ") is outside dim ", dim, " of ", x.desc());
  const int64_t outer = shape_numel(Shape(x.shape().begin(), x.shape().begin() + d));
  const int64_t inner = shape_numel(Shape(x.shape().begin() + d + 1, x.shape().end()));
  Shape os = x.shape();
  os[size_t(d)] = length;
  Tensor out = Tensor::empty(os, t, x.device());
  copy_rows(x, start * inner, x.size(d) * inner, out, 0, length * inner, outer, length * inner);
  // The gradient lands in its slot of a zero tensor.
  const Shape full = x.shape();
  record("narrow", out, {x}, [full, outer, inner, d, start, length](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = Tensor::zeros(full, g.dtype(), g.device());
    copy_rows(g, 0, length * inner, dx, start * inner, full[size_t(d)] * inner, outer, length * inner);
    return std::vector<Tensor>{dx};
  });
  return out;
}

Tensor pad_rows(const Tensor& x, int64_t rows, DType dtype) {
  check_float_inputs("pad_rows", {x}, GpuKernel::yes);
  ENGINE_CHECK(x.ndim() >= 1 && rows >= x.size(0), "pad_rows: ", rows, " rows for ", x.desc());
  const int64_t R = x.size(0);
  Shape os = x.shape();
  os[0] = rows;
  Tensor out = Tensor::empty(os, dtype, x.device());
  {
    const NoGradGuard ng;          // the slices below are views of out, not recorded
    out.slice(0, R).copy_from(x);  // on emu/cuda the cast kernel when the dtypes differ
    Tensor tail = out.slice(R, rows);
    if (tail.numel() > 0 && on_gpu(tail))
      fill_(tail, 0.0);
    else if (tail.numel() > 0)
      std::memset(tail.data_ptr(), 0, tail.nbytes());
  }
  const DType in_dtype = x.dtype();
  // The padding's gradient is dropped.
  record("pad_rows", out, {x}, [in_dtype, R](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{leading_rows_in(g, R, in_dtype)};
  });
  if (in_dtype == DType::f32 && dtype_size(dtype) == 2) accept_wide_grad(out);
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim) {
  check_float_inputs("split", {x}, GpuKernel::yes);
  const int d = norm_dim("split", dim, x.ndim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    ENGINE_CHECK(s >= 0, "split: negative size for ", x.desc());
    total += s;
  }
  ENGINE_CHECK(total == x.size(d), "split: sizes sum to ", total, " but dim ", dim, " of ", x.desc(), " is ",
               x.size(d));
  // Each piece is its own node (a narrow).
  std::vector<Tensor> outs;
  int64_t start = 0;
  for (int64_t s : sizes) {
    outs.push_back(narrow(x, d, start, s));
    start += s;
  }
  return outs;
}

}  // namespace eng
