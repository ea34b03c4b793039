// Module parameter registry and traversal (depth first, registration order).
#include "engine/nn/module.h"

#include "base/error.h"

namespace eng {

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  for (auto& [n, p] : params_) ENGINE_CHECK(n != name, "register_parameter: duplicate name '", name, "'");
  t.set_requires_grad(true);
  params_.emplace_back(name, t);
  return t;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  for (const auto& [cname, child] : children_)
    for (auto& [pname, p] : child->named_parameters()) out.emplace_back(cname + "." + pname, p);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

void Module::zero_grad() {
  for (auto& [n, p] : named_parameters()) p.zero_grad();
}

}  // namespace eng
