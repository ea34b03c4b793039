// The shard <-> full rules of a tp-split model (tp_model.h).
#include "models/tp_model.h"

#include "base/error.h"
#include "comm/tp_layers.h"
#include "engine/autograd.h"

namespace eng::models {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Tensor TpModel::shard_custom(const std::string& name, const Tensor&) const {
  ENGINE_FAIL("tp: no custom split for ", name);
}
Tensor TpModel::unshard_custom(const std::string& name, const Tensor&) const {
  ENGINE_FAIL("tp: no custom split for ", name);
}

Tensor TpModel::shard(const std::string& name, const Tensor& full) const {
  NoGradGuard no_grad;
  switch (split_of(name)) {
    case TpSplit::rows:
      return comm::shard_rows(full, 1, *tp_);
    case TpSplit::qkv_rows:
      return comm::shard_rows(full, 3, *tp_);
    case TpSplit::cols:
      return comm::shard_cols(full, *tp_);
    case TpSplit::custom:
      return shard_custom(name, full);
    case TpSplit::whole:
      break;
  }
  return full.detach();
}

Tensor TpModel::unshard(const std::string& name, const Tensor& mine) const {
  NoGradGuard no_grad;
  switch (split_of(name)) {
    case TpSplit::rows:
      return comm::unshard_rows(mine, 1, *tp_);
    case TpSplit::qkv_rows:
      return comm::unshard_rows(mine, 3, *tp_);
    case TpSplit::cols:
      return comm::unshard_cols(mine, *tp_);
    case TpSplit::custom:
      return unshard_custom(name, mine);
    case TpSplit::whole:
      break;
  }
  return mine.detach();
}

std::vector<std::pair<std::string, Tensor>> TpModel::full_state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : named_parameters()) out.emplace_back(name, unshard(name, p));
  return out;
}

void TpModel::load_full_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  NoGradGuard no_grad;
  // By name: a pipeline stage takes its own parameters of the whole model's state.
  for (const auto& [name, p] : named_parameters()) {
    const Tensor* full = nullptr;
    for (const auto& [n, t] : state)
      if (n == name) full = &t;
    ENGINE_CHECK(full, "model state: no tensor ", name, " among ", state.size());
    Tensor dst = p;
    dst.copy_from(shard(name, *full));
  }
}

std::vector<Tensor> TpModel::replicated_parameters() const {
  std::vector<Tensor> out;
  for (const auto& [name, p] : named_parameters())
    if (split_of(name) == TpSplit::whole) out.push_back(p);
  return out;
}

void TpModel::sync_partial_grads() {
  for (const Tensor& p : partial_parameters()) {
    Tensor g = p.grad();
    if (g.defined()) tp_->all_reduce(g, comm::ReduceOp::sum).wait();
  }
}

}  // namespace eng::models
