// The one-process layout for a tp-split model's checkpoint (tp_checkpoint.h).
#include "models/train/tp_checkpoint.h"

namespace eng::models {

namespace {

// Parameter names in AdamW's order (decay_groups: matrices, then vectors).
std::vector<std::string> optimizer_names(const TpModel& m) {
  std::vector<std::string> out;
  const auto named = m.named_parameters();
  for (const ParamGroup& g : decay_groups(m.parameters(), 0.0))
    for (const Tensor& p : g.params)
      for (const auto& [name, q] : named)
        if (q.same(p)) out.push_back(name);
  return out;
}

// i of "exp_avg.i" / "exp_avg_sq.i"; -1 for the other entries (step counts).
size_t moment_index(const std::string& key) {
  for (const std::string prefix : {"exp_avg.", "exp_avg_sq."})
    if (key.rfind(prefix, 0) == 0) return size_t(std::stoul(key.substr(prefix.size())));
  return size_t(-1);
}

}  // namespace

TpGrads tp_grads_of(TpModel& m) {
  TpGrads g;
  g.tp = &m.tp();
  g.replicated = m.replicated_parameters();
  for (const Tensor& p : m.parameters()) {
    bool rep = false;
    for (const Tensor& r : g.replicated) rep = rep || r.same(p);
    if (!rep) g.sharded.push_back(p);
  }
  g.partial = m.partial_parameters();
  TpModel* model = &m;
  g.sync_partial = [model] { model->sync_partial_grads(); };
  return g;
}

NamedTensors gather_tp_checkpoint(const TpModel& m, Module* serial, NamedTensors opt_state, Device dev) {
  const NamedTensors state = m.full_state();
  if (serial)
    for (const auto& [name, p] : serial->named_parameters()) {
      Tensor dst = p;
      dst.copy_from(find_state(state, name, p.shape()));
    }
  const std::vector<std::string> names = optimizer_names(m);
  for (auto& [key, t] : opt_state) {
    const size_t i = moment_index(key);
    if (i != size_t(-1)) t = m.unshard(names.at(i), t.to(dev)).to(kCPU);
  }
  return opt_state;
}

nlohmann::json load_tp_checkpoint(TpModel& m, Module& serial, Optimizer& opt, Device dev,
                                  const std::function<nlohmann::json(Optimizer&)>& load) {
  AdamW full_opt(decay_groups(serial.parameters(), 0.0), 1.0);
  const nlohmann::json state = load(full_opt);
  m.load_full_state(serial.named_parameters());
  const std::vector<std::string> names = optimizer_names(m);
  NamedTensors mine = full_opt.state();
  for (auto& [key, t] : mine) {
    const size_t i = moment_index(key);
    if (i != size_t(-1)) t = m.shard(names.at(i), t.to(dev));
  }
  opt.load_state(mine);
  return state;
}

}  // namespace eng::models
