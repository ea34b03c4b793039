// Tensor factories, views, copies and the autograd entry points.
#include "engine/tensor.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/cast.h"
#include "engine/graph.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gpu_ops.h"
#include "kernels/rng.h"

namespace eng {

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Storage::Storage(size_t nbytes, Device dev) : bytes(nbytes), device(dev) { data = allocator_for(dev).allocate(nbytes); }
Storage::~Storage() { allocator_for(device).release(data, bytes); }

static bool host_memory(Device d) { return d.type != DeviceType::cuda; }

Tensor Tensor::scratch(size_t bytes, Device dev) {
  return empty({int64_t(std::max<size_t>(bytes, 1) + 3) / 4}, DType::f32, dev);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device dev) {
  for (int64_t d : shape) ENGINE_CHECK(d >= 0, "empty: negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = dev;
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), dev);
  return Tensor(std::move(impl));
}

// Builds the tensor on the host in `dtype`, then moves it to `dev`.
static Tensor from_host_doubles(const std::vector<double>& v, const Shape& shape, DType dtype, Device dev) {
  Tensor host = Tensor::empty(shape, dtype, kCPU);
  cast(v.data(), DType::f64, host.data_ptr(), dtype, int64_t(v.size()));
  return dev == kCPU ? host : host.to(dev);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device dev) { return full(shape, 0.0, dtype, dev); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device dev) {
  // Floating tensors on a GPU device: the fill kernel (float(value) rounded to
  // the storage type, as the host cast does), so that a CUDA graph can capture it.
  if (dev.type != DeviceType::cpu && (dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16)) {
    Tensor t = empty(shape, dtype, dev);
    if (t.numel() > 0)
      ENGINE_GPU_CALL(dev, fill_inplace, gpu::storage_of(dtype), t.data_ptr(), float(value), t.numel(), nullptr);
    return t;
  }
  // All-zero bits mean 0 in every dtype. Not on emu during a capture: a host
  // memset would run once, at capture (on cuda the copy below is refused).
  if (host_memory(dev) && value == 0.0 && (dev.type == DeviceType::cpu || !capturing())) {
    Tensor t = empty(shape, dtype, dev);
    std::memset(t.data_ptr(), 0, t.nbytes());
    return t;
  }
  return from_host_doubles(std::vector<double>(size_t(shape_numel(shape)), value), shape, dtype, dev);
}

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& shape, DType dtype, Device dev) {
  ENGINE_CHECK(int64_t(v.size()) == shape_numel(shape), "from_vector: ", v.size(), " values for shape ",
               shape_str(shape));
  return from_host_doubles(std::vector<double>(v.begin(), v.end()), shape, dtype, dev);
}

Tensor Tensor::from_ints(const std::vector<int32_t>& v, const Shape& shape, Device dev) {
  ENGINE_CHECK(int64_t(v.size()) == shape_numel(shape), "from_ints: ", v.size(), " values for shape ",
               shape_str(shape));
  Tensor host = empty(shape, DType::i32, kCPU);
  if (!v.empty()) std::memcpy(host.data_ptr(), v.data(), v.size() * 4);
  return dev == kCPU ? host : host.to(dev);
}

Tensor Tensor::randn(const Shape& shape, uint64_t seed, float std, DType dtype, Device dev) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(std) * rng::normal(seed, i);
  return from_host_doubles(v, shape, dtype, dev);
}

Tensor Tensor::uniform(const Shape& shape, uint64_t seed, float lo, float hi, DType dtype, Device dev) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = lo + double(hi - lo) * rng::uniform(seed, i);
  return from_host_doubles(v, shape, dtype, dev);
}

const Shape& Tensor::shape() const {
  ENGINE_CHECK(impl_, "use of an undefined tensor");
  return impl_->shape;
}

int64_t Tensor::size(int dim) const {
  const int nd = ndim();
  const int d = dim < 0 ? dim + nd : dim;
  ENGINE_CHECK(d >= 0 && d < nd, "dim ", dim, " out of range for shape ", shape_str(shape()));
  return impl_->shape[size_t(d)];
}

DType Tensor::dtype() const {
  ENGINE_CHECK(impl_, "use of an undefined tensor");
  return impl_->dtype;
}

Device Tensor::device() const {
  ENGINE_CHECK(impl_, "use of an undefined tensor");
  return impl_->device;
}

std::string Tensor::desc() const {
  if (!impl_) return "undefined";
  return cat(dtype_name(impl_->dtype), shape_str(impl_->shape), " on ", impl_->device.str());
}

void* Tensor::data_ptr() const {
  ENGINE_CHECK(impl_, "use of an undefined tensor");
  return static_cast<char*>(impl_->storage->data) + impl_->offset;
}

void Tensor::check_type(size_t elem_size) const {
  ENGINE_CHECK(dtype_size(dtype()) == elem_size, "data<T>(): element size ", elem_size, " does not match ", desc());
}

Tensor Tensor::reshape(const Shape& new_shape) const {
  Shape s = new_shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ENGINE_CHECK(infer < 0, "reshape: more than one -1 in ", shape_str(new_shape));
      infer = int(i);
    } else {
      ENGINE_CHECK(s[i] >= 0, "reshape: bad dimension in ", shape_str(new_shape));
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ENGINE_CHECK(known > 0 && numel() % known == 0, "reshape: cannot reshape ", desc(), " to ", shape_str(new_shape));
    s[size_t(infer)] = numel() / known;
  }
  ENGINE_CHECK(shape_numel(s) == numel(), "reshape: cannot reshape ", desc(), " to ", shape_str(new_shape));
  auto impl = std::make_shared<TensorImpl>(*impl_);
  impl->shape = s;
  impl->grad.reset();
  impl->grad_fn.reset();
  impl->final_hooks.clear();
  impl->requires_grad = false;
  Tensor out(std::move(impl));
  const Shape old = shape();
  record("reshape", out, {*this},
         [old](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.reshape(old)}; });
  return out;
}

Tensor Tensor::slice(int64_t start, int64_t end) const {
  ENGINE_CHECK(ndim() >= 1 && 0 <= start && start <= end && end <= size(0), "slice: rows [", start, ", ", end,
               ") out of range for ", desc());
  auto impl = std::make_shared<TensorImpl>(*impl_);
  impl->shape[0] = end - start;
  const int64_t row = numel() / std::max<int64_t>(size(0), 1);
  impl->offset += size_t(start * row) * dtype_size(dtype());
  impl->grad.reset();
  impl->grad_fn.reset();
  impl->final_hooks.clear();
  impl->requires_grad = false;
  Tensor out(std::move(impl));
  const Shape full_shape = shape();
  record("slice", out, {*this}, [full_shape, start, end](const Tensor& g, const std::vector<bool>&) {
    NoGradGuard ng;
    Tensor dx = Tensor::zeros(full_shape, g.dtype(), g.device());
    dx.slice(start, end).copy_from(g);
    return std::vector<Tensor>{dx};
  });
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  ENGINE_CHECK(shape() == src.shape(), "copy_from: shape ", src.desc(), " into ", desc());
  if (dtype() == src.dtype()) {
    if (device() == src.device() && device().type != DeviceType::cpu)
      copy_async(data_ptr(), device(), src.data_ptr(), src.device(), nbytes());  // stream-ordered: capturable
    else
      copy_bytes(data_ptr(), device(), src.data_ptr(), src.device(), nbytes());
    return;
  }
  // Between f32, bf16 and f16 on one GPU device: the cast kernel
  // (kernels/cuda/cast.cu), bit-identical to the host conversion below.
  auto gpu_float = [](DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; };
  if (device() == src.device() && device().type != DeviceType::cpu && gpu_float(dtype()) && gpu_float(src.dtype())) {
    ENGINE_GPU_CALL(device(), cast_storage, gpu::storage_of(src.dtype()), src.data_ptr(), gpu::storage_of(dtype()),
                    data_ptr(), numel(), nullptr);
    return;
  }
  // Otherwise convert on the host (a cuda tensor makes a round trip): not
  // capturable, on emu (host memory) no less than on cuda.
  ENGINE_CHECK(!capturing() || (device().type == DeviceType::cpu && src.device().type == DeviceType::cpu),
               "copy_from: a host-side conversion ", src.desc(), " -> ", dtype_name(dtype()),
               " during CUDA graph capture (not capturable)");
  Tensor s = host_memory(src.device()) ? src : src.detach().to(kCPU);
  if (host_memory(device())) {
    cast(s.data_ptr(), s.dtype(), data_ptr(), dtype(), numel());
  } else {
    Tensor tmp = empty(shape(), dtype(), kCPU);
    cast(s.data_ptr(), s.dtype(), tmp.data_ptr(), dtype(), numel());
    copy_bytes(data_ptr(), device(), tmp.data_ptr(), kCPU, nbytes());
  }
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Tensor out = empty(shape(), dtype(), dev);
  copy_bytes(out.data_ptr(), dev, data_ptr(), device(), nbytes());
  const Device src = device();
  record("to_device", out, {*this},
         [src](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.to(src)}; });
  return out;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor out = empty(shape(), t, device());
  out.copy_from(*this);
  const DType src = dtype();
  if (is_floating(t) && is_floating(src)) {
    // An fp32 gradient of a narrowing cast from fp32 passes through as it is
    // (g.to(f32) of an fp32 g): autograd may hand one (takes_wide_grad).
    record("to_dtype", out, {*this},
           [src](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.to(src)}; });
    if (src == DType::f32 && dtype_size(t) == 2) accept_wide_grad(out);
  }
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_from(*this);
  record("clone", out, {*this}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  impl->device = impl_->device;
  return Tensor(std::move(impl));
}

std::vector<double> Tensor::to_f64_vector() const {
  Tensor host = device() == kCPU ? *this : detach().to(kCPU);
  std::vector<double> v(static_cast<size_t>(numel()));
  cast(host.data_ptr(), dtype(), v.data(), DType::f64, numel());
  return v;
}

std::vector<float> Tensor::to_vector() const {
  std::vector<double> d = to_f64_vector();
  return std::vector<float>(d.begin(), d.end());
}

float Tensor::item() const {
  ENGINE_CHECK(numel() == 1, "item: tensor ", desc(), " has more than one element");
  return to_vector()[0];
}

// A non-leaf requires grad exactly when an op recorded it.
bool Tensor::requires_grad() const { return impl_ && (impl_->requires_grad || impl_->grad_fn); }

Tensor& Tensor::set_requires_grad(bool r) {
  ENGINE_CHECK(!r || is_floating(dtype()), "requires_grad: only floating tensors can require grad, got ", desc());
  ENGINE_CHECK(is_leaf(), "requires_grad: can only be set on a leaf tensor");
  impl_->requires_grad = r;
  return *this;
}

bool Tensor::is_leaf() const { return !impl_ || !impl_->grad_fn; }

Tensor Tensor::grad() const { return impl_ && impl_->grad ? Tensor(impl_->grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  ENGINE_CHECK(!g.defined() || g.shape() == shape(), "set_grad: gradient ", g.desc(), " for ", desc());
  impl_->grad = g.impl_ptr();
}

void Tensor::zero_grad() { impl_->grad.reset(); }

void Tensor::backward(const Tensor& grad) const { run_backward(*this, grad); }

void Tensor::add_final_grad_hook(GradHook hook) {
  ENGINE_CHECK(is_leaf() && requires_grad(), "add_final_grad_hook: needs a leaf that requires grad");
  impl_->final_hooks.push_back(std::move(hook));
}

}  // namespace eng
