// Optimizer base and parameter grouping.
#include "engine/optim/optimizer.h"

#include <cmath>

#include "base/error.h"

namespace eng {

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)), lr_(lr) {
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params)
      ENGINE_CHECK(p.is_leaf() && p.requires_grad(), "optimizer: parameter ", p.desc(),
                   " is not a leaf that requires grad");
}

void Optimizer::step(const Tensor&) {
  ENGINE_FAIL("optimizer ", name(), " has no GPU kernel: use adamw, adamw8bit or adafactor on emu/cuda");
}

void Optimizer::prepare_replay() { ENGINE_FAIL("optimizer ", name(), " cannot be captured in a CUDA graph"); }

AdamConstants adam_constants(double lr, double weight_decay, double beta1, double beta2, int64_t t) {
  const double bc1 = 1.0 - std::pow(beta1, double(t)), bc2 = 1.0 - std::pow(beta2, double(t));
  return {float(1.0 - lr * weight_decay), float(lr / bc1), float(std::sqrt(bc2))};
}

void Optimizer::zero_grad() {
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) p.zero_grad();
}

const Tensor& find_state(const std::vector<std::pair<std::string, Tensor>>& state, const std::string& name,
                         const Shape& shape) {
  for (auto& [n, t] : state)
    if (n == name) {
      ENGINE_CHECK(t.shape() == shape, "optimizer state '", name, "' is ", t.desc(), ", expected shape ",
                   shape_str(shape));
      return t;
    }
  ENGINE_FAIL("optimizer state '", name, "' is missing");
}

bool state_is_fresh(const std::vector<std::pair<std::string, Tensor>>& state, const std::string& first_entry) {
  for (auto& [n, t] : state)
    if (n == first_entry) return false;
  return true;
}

std::vector<ParamGroup> decay_groups(const std::vector<Tensor>& params, double weight_decay) {
  ParamGroup decay{{}, weight_decay, 1.0}, no_decay{{}, 0.0, 1.0};
  for (const Tensor& p : params) (p.ndim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

}  // namespace eng
