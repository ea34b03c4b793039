// Checks and dtype dispatch shared by the engine-facing ops (private to engine/ops).
// Every error names the op and the tensors involved, e.g.
//   "matmul: inner dimensions differ: f32(2, 3) on cpu @ f32(4, 5) on cpu"
#pragma once
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/cuda/gpu_ops.h"

namespace eng::detail {

inline std::string descs(const std::vector<Tensor>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].desc();
  return s;
}

// Whether an op has hand-written CUDA kernels (so runs on emu and cuda).
enum class GpuKernel : uint8_t { no, yes };

inline bool on_gpu(const Tensor& t) { return t.device().type != DeviceType::cpu; }

using gpu::storage_of;

// All defined tensors on one device, with the same floating dtype that the
// device's kernels handle: f32 or f64 on the cpu; f32, bf16 or f16 on emu and
// cuda, for ops with GPU kernels. Returns that dtype.
inline DType check_float_inputs(const char* op, const std::vector<Tensor>& ts, GpuKernel gpu = GpuKernel::no) {
  for (const Tensor& t : ts) ENGINE_CHECK(t.defined(), op, ": undefined input tensor");
  const Tensor& t0 = ts[0];
  for (const Tensor& t : ts) {
    ENGINE_CHECK(t.device() == t0.device(), op, ": inputs on different devices: ", descs(ts));
    ENGINE_CHECK(t.dtype() == t0.dtype(), op, ": inputs of different dtypes: ", descs(ts));
  }
  if (on_gpu(t0) && gpu == GpuKernel::yes) {
    ENGINE_CHECK(t0.dtype() == DType::f32 || t0.dtype() == DType::bf16 || t0.dtype() == DType::f16, op, ": dtype ",
                 dtype_name(t0.dtype()), " not supported on ", t0.device().str(), " (f32, bf16 or f16): ", descs(ts));
    return t0.dtype();
  }
  ENGINE_CHECK(t0.device().type == DeviceType::cpu, op, ": no kernel for device ", t0.device().str(),
               " yet (the CUDA backend issues add it): ", descs(ts));
  ENGINE_CHECK(t0.dtype() == DType::f32 || t0.dtype() == DType::f64, op, ": dtype ", dtype_name(t0.dtype()),
               " not supported on cpu (f32 or f64; convert with .to(DType::f32)): ", descs(ts));
  return t0.dtype();
}

inline void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  ENGINE_CHECK(a.shape() == b.shape(), op, ": shapes differ: ", a.desc(), " and ", b.desc());
}

inline void check_ids(const char* op, const Tensor& ids, const Tensor& like) {
  ENGINE_CHECK(ids.dtype() == DType::i32, op, ": indices must be i32, got ", ids.desc());
  ENGINE_CHECK(ids.device() == like.device(), op, ": indices ", ids.desc(), " and data ", like.desc(),
               " on different devices");
}

// Calls f.template operator()<T>() with T = float or double for the dtype.
template <typename F>
decltype(auto) dispatch_float(DType t, F&& f) {
  if (t == DType::f64) return f.template operator()<double>();
  return f.template operator()<float>();
}

inline int norm_dim(const char* op, int dim, int ndim) {
  const int d = dim < 0 ? dim + ndim : dim;
  ENGINE_CHECK(d >= 0 && d < ndim, op, ": dim ", dim, " out of range for ", ndim, "-d tensor");
  return d;
}

inline Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }

// The column sums of g's first rows x cols elements (contiguous rows) on
// emu/cuda, a bias gradient apart from its GEMM (kernels/cuda/bias_grad.h,
// its scratch allocated here): written to db (fp32 when db_f32, else g's
// dtype) or added to an fp32 db. db may point into a larger tensor
// (engine/ops/matmul.cpp).
void column_sums_gpu(const Tensor& g, int64_t rows, int64_t cols, void* db, bool db_f32, bool add);
// Inside a node's backward: input `input`'s gradient (a bias) from fp32
// column sums another kernel made (GradEpilogue::dbias, layernorm's):
// as they are where the input is autocast's 16-bit copy of an fp32 master
// that takes them (takes_wide_grad), added into the master's gradient where
// that holds one (a later micro-batch: take_master_grad); else cast to
// `dtype`, the input's.
Tensor bias_grad_from_sums(const Tensor& sums, DType dtype, size_t input);
// dx = gelu'(x) * g on the tensors' device (engine/ops/activation.cpp); gelu's
// backward, and linear_gelu's with x = the saved pre-activation.
Tensor gelu_grad(const Tensor& x, const Tensor& g);
// attention(..., AttentionImpl::cudnn) on a cuda tensor (attention_cudnn.cpp, CUDA builds).
Tensor attention_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal);
// attention_qkv(..., AttentionImpl::cudnn) on a cuda tensor: the packed qkv in place.
Tensor attention_qkv_cudnn(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, Causal causal);

// q, k or v (i = 0, 1, 2) of an attention's inputs, which hold the three
// tensors or one packed (B, T, 3C) qkv: ins[min(i, size - 1)] + off[i]
// elements. The same for their gradients, laid out as the inputs.
inline void* qkv_part(const std::vector<Tensor>& ins, const std::array<int64_t, 3>& off, size_t i) {
  const Tensor& t = ins[std::min(i, ins.size() - 1)];
  return static_cast<char*>(t.data_ptr()) + size_t(off[i]) * dtype_size(t.dtype());
}

// The backward of a cast that may also pad rows (pad_rows, autocast's kept
// copies): g's first `rows` rows in `dtype`. A g already in `dtype` (an
// fp32 gradient a GEMM wrote wide: takes_wide_grad) is handed on as it is,
// or as a view of its leading rows; else they are cast into a new tensor.
inline Tensor leading_rows_in(const Tensor& g, int64_t rows, DType dtype) {
  if (g.dtype() == dtype) return g.size(0) == rows ? g : g.slice(0, rows);
  Shape shape = g.shape();
  shape[0] = rows;
  Tensor dx = Tensor::empty(shape, dtype, g.device());
  dx.copy_from(g.slice(0, rows));
  return dx;
}

}  // namespace eng::detail
