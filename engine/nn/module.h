// Module: a tree of named parameters, as torch.nn.Module. Parameter names are
// dotted paths ("fc1.weight") and are what checkpoints use, so renaming a
// member is a format change.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace eng {

class Module {
 public:
  virtual ~Module() = default;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  void zero_grad();

 protected:
  // Marks t as a leaf that requires grad and keeps a handle under `name`.
  Tensor register_parameter(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace eng
