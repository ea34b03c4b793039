// Tensor: a handle to shared storage plus shape, dtype and device.
// Conventions: tensors are contiguous and row-major; the only views are
// reshape() and slice() along dim 0, which share storage with their source.
// Copying a Tensor copies the handle, not the data (like torch.Tensor).
// Autograd state (requires_grad, grad, grad_fn) lives in the TensorImpl so all
// handles to one tensor see the same gradient.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "engine/device.h"

namespace eng {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2, 3, 4)"
int64_t shape_numel(const Shape& s);

struct Storage {
  Storage(size_t bytes, Device dev);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t bytes = 0;
  Device device;
};

struct Node;
class Tensor;
using GradHook = std::function<void(Tensor& grad)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes from storage->data to element 0
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;   // accumulated gradient of a leaf
  std::shared_ptr<Node> grad_fn;      // the op that produced this tensor, if recorded
  std::vector<GradHook> final_hooks;  // called once the leaf's gradient is final in a backward
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories. Data is uninitialised for empty(); the others fill it.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device dev = kCPU);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device dev = kCPU);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device dev = kCPU);
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape, DType dtype = DType::f32,
                            Device dev = kCPU);
  static Tensor from_ints(const std::vector<int32_t>& v, const Shape& shape, Device dev = kCPU);
  // A scratch buffer of at least `bytes` bytes on dev (a library's workspace:
  // cuDNN's), never empty, so data_ptr() is a valid address even for 0 bytes.
  static Tensor scratch(size_t bytes, Device dev);
  // Normal(0, std) from a seeded counter-based RNG: same seed, same values on every device.
  static Tensor randn(const Shape& shape, uint64_t seed, float std = 1.f, DType dtype = DType::f32, Device dev = kCPU);
  static Tensor uniform(const Shape& shape, uint64_t seed, float lo, float hi, DType dtype = DType::f32,
                        Device dev = kCPU);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t size(int dim) const;  // negative dims count from the end
  int ndim() const { return int(shape().size()); }
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const;
  Device device() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }
  std::string desc() const;  // "f32(2, 3) on cpu", used in error messages

  void* data_ptr() const;
  template <typename T>
  T* data() const {
    check_type(sizeof(T));
    return static_cast<T*>(data_ptr());
  }

  // Views (share storage). Both are recorded by autograd.
  Tensor reshape(const Shape& shape) const;
  Tensor slice(int64_t start, int64_t end) const;  // rows [start, end) of dim 0

  // Copies.
  Tensor to(Device dev) const;
  Tensor to(DType dtype) const;
  Tensor clone() const;
  Tensor detach() const;                 // same storage, no autograd history
  std::vector<float> to_vector() const;  // host copy converted to float
  std::vector<double> to_f64_vector() const;
  float item() const;
  void copy_from(const Tensor& src);  // same shape; converts dtype and device; not recorded

  // Autograd.
  bool requires_grad() const;
  Tensor& set_requires_grad(bool r);
  bool is_leaf() const;
  Tensor grad() const;  // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  void zero_grad();                                    // drops the gradient (like set_to_none=True)
  void backward(const Tensor& grad = Tensor()) const;  // seeds with 1 for a scalar
  void add_final_grad_hook(GradHook hook);             // fires when this leaf's gradient is final

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  void check_type(size_t elem_size) const;
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace eng
