// The one-process layout for a tp-split model's checkpoint (tp_checkpoint.h).
#include "models/train/tp_checkpoint.h"

#include <algorithm>
#include <iterator>

#include "engine/autograd.h"

namespace eng::models {

namespace {

// Parameter names in AdamW's order (decay_groups: matrices, then vectors).
std::vector<std::string> optimizer_names(const Module& m) {
  std::vector<std::string> out;
  const auto named = m.named_parameters();
  for (const ParamGroup& g : decay_groups(m.parameters(), 0.0))
    for (const Tensor& p : g.params)
      for (const auto& [name, q] : named)
        if (q.same(p)) out.push_back(name);
  return out;
}

Tensor f64_tensor(const std::vector<double>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::f64);
  for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return t;
}

// i of "exp_avg.i" / "exp_avg_sq.i"; -1 for the other entries (step counts).
size_t moment_index(const std::string& key) {
  for (const std::string prefix : {"exp_avg.", "exp_avg_sq."})
    if (key.rfind(prefix, 0) == 0) return size_t(std::stoul(key.substr(prefix.size())));
  return size_t(-1);
}

// "kind.i" -> (kind, i) for any per-parameter entry; i = -1 for the others.
std::pair<std::string, size_t> split_key(const std::string& key) {
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos || dot + 1 == key.size() ||
      key.find_first_not_of("0123456789", dot + 1) != std::string::npos)
    return {key, size_t(-1)};
  return {key.substr(0, dot), size_t(std::stoul(key.substr(dot + 1)))};
}

// 8-bit AdamW's state of a split parameter is quantized in the shard's own
// blocks (its codes, u8, and its per-block absmax): it has no full shape.
// The checkpoint keeps every tp rank's as a row of a (tp, entries) tensor,
// which only a run at the same tp resumes (check_resumed_config says so).
bool per_shard(const TpModel& m, const std::string& name, const std::string& kind, const Tensor& t) {
  return m.tp().size() > 1 && m.is_split(name) && (t.dtype() == DType::u8 || kind.find("absmax") != std::string::npos);
}

// Whether a state list holds any per-parameter entry ("kind.i"): not one
// saved before the optimizer's first update.
bool has_param_state(const NamedTensors& s) {
  for (const auto& [key, t] : s)
    if (split_key(key).second != size_t(-1)) return true;
  return false;
}

// Collective over tp: this rank's per-parameter state to the checkpoint's
// layout: fp32 moments to the parameter's full shape, 8-bit codes and scales
// of split parameters one row per tp rank; the rest as it is.
void gather_state_over_tp(const TpModel& m, const std::vector<std::string>& names, NamedTensors& opt_state,
                          Device dev) {
  for (auto& [key, t] : opt_state) {
    const auto [kind, i] = split_key(key);
    if (i == size_t(-1) || m.tp().size() == 1) continue;
    if (per_shard(m, names.at(i), kind, t)) {
      const Tensor mine = t.to(dev).reshape({t.numel()});
      Tensor all = Tensor::empty({m.tp().size() * t.numel()}, t.dtype(), dev);
      m.tp().all_gather(mine, all).wait();
      t = all.reshape({m.tp().size(), t.numel()}).to(kCPU);
    } else if (moment_index(key) != size_t(-1)) {
      t = m.unshard(names.at(i), t.to(dev)).to(kCPU);
    }
  }
}

// The per-parameter state kinds a pipeline stage may send (their index is
// what travels).
const char* const kKinds[] = {"exp_avg",        "exp_avg_sq",     "exp_avg_absmax", "exp_avg_sq_absmax",
                              "exp_avg_sq_row", "exp_avg_sq_col", "momentum_buffer"};
constexpr int kHeader = 8;  // per entry: kind, dtype, ndim, up to 4 dims, unused

// Holds the state a checkpoint file has, as it is (load_tp_checkpoint slices it).
class StateCapture : public Optimizer {
 public:
  explicit StateCapture(std::string name) : Optimizer({}, 0.0), name_(std::move(name)) {}
  void step() override { ENGINE_FAIL("StateCapture does not step"); }
  const char* name() const override { return name_.c_str(); }
  std::string state_note() const override { return ""; }
  NamedTensors state() const override { return state_; }
  void load_state(const NamedTensors& s) override { state_ = s; }

 private:
  std::string name_;
  NamedTensors state_;
};

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
  gather_state_over_tp(m, optimizer_names(m), opt_state, dev);
  return opt_state;
}

nlohmann::json load_tp_checkpoint(TpModel& m, Module& serial, Optimizer& opt, Device dev,
                                  const std::function<nlohmann::json(Optimizer&)>& load) {
  StateCapture captured(opt.name());  // the file's state as it is
  const nlohmann::json state = load(captured);
  m.load_full_state(serial.named_parameters());
  // State i of this model is the serial model's state of the same name (a
  // pipeline stage holds some of them), sharded: fp32 moments by the
  // parameter's split, 8-bit codes and scales by this rank's row.
  const std::vector<std::string> names = optimizer_names(m), all = optimizer_names(serial);
  const NamedTensors full = captured.state();
  if (!has_param_state(full)) {  // saved before any update: nothing to shard
    opt.load_state(full);
    return state;
  }
  std::vector<std::vector<std::pair<std::string, Tensor>>> of_param(all.size());  // the file's entries by parameter
  for (const auto& [key, t] : full) {
    const auto [kind, i] = split_key(key);
    if (i != size_t(-1) && i < all.size()) of_param[i].emplace_back(kind, t);
  }
  NamedTensors mine;
  std::vector<double> steps;
  const std::vector<double> all_steps = find_state(full, "step", {int64_t(all.size())}).to_f64_vector();
  for (size_t j = 0; j < names.size(); ++j) {
    const size_t i = size_t(std::find(all.begin(), all.end(), names[j]) - all.begin());
    ENGINE_USER_CHECK(i < all.size(), "checkpoint: no optimizer state for ", names[j]);
    for (const auto& [kind, t] : of_param[i]) {
      Tensor s;
      if (per_shard(m, names[j], kind, t)) {
        ENGINE_USER_CHECK(t.ndim() == 2 && t.size(0) == m.tp().size(), "checkpoint: optimizer state '", kind, ".", i,
                          "' is ", t.desc(), ", one row per tp rank of ", m.tp().size(), " expected");
        s = t.slice(m.tp().rank(), m.tp().rank() + 1).reshape({t.size(1)}).to(dev);
      } else {  // fp32 moments in the parameter's shape; whole parameters and tp 1: as they are
        s = m.tp().size() == 1 ? t.to(dev) : m.shard(names[j], t.to(dev));
      }
      mine.emplace_back(kind + "." + std::to_string(j), s);
    }
    steps.push_back(all_steps[i]);
  }
  mine.emplace_back("step", f64_tensor(steps));
  mine.emplace_back("optimizer_steps", find_state(full, "optimizer_steps", {1}));
  opt.load_state(mine);
  return state;
}

NamedTensors gather_pipeline_checkpoint(const TpModel& m, Module* serial, NamedTensors opt_state, Device dev,
                                        const StageGather& g) {
  // Every rank of tp: full shapes (collective over tp).
  const NamedTensors weights = m.full_state();
  const std::vector<std::string> names = optimizer_names(m);
  std::vector<double> steps;
  if (has_param_state(opt_state)) steps = find_state(opt_state, "step", {int64_t(names.size())}).to_f64_vector();
  gather_state_over_tp(m, names, opt_state, dev);
  if (!g.leader) return {};
  // Parameter j's entries (kind, tensor), in the optimizer's order.
  std::vector<std::vector<std::pair<int, Tensor>>> of_param(names.size());
  for (const auto& [key, t] : opt_state) {
    const auto [kind, j] = split_key(key);
    if (j == size_t(-1)) continue;
    int k = 0;
    while (k < int(std::size(kKinds)) && kind != kKinds[k]) ++k;
    ENGINE_CHECK(k < int(std::size(kKinds)) && t.ndim() <= 4, "checkpoint: optimizer state '", key, "' (", t.desc(),
                 ") cannot travel between pipeline stages");
    of_param.at(j).emplace_back(k, t);
  }
  comm::Communicator& pp = *g.pp;
  const int me = pp.rank();
  // What stage k sends rank 0, in an order both compute alike: the weights in
  // registration order, then per parameter a header (how many entries, and
  // each one's kind, dtype and shape), its entries and its step count.
  auto send = [&](const Tensor& t) { pp.send(t.to(dev), 0).wait(); };
  if (me != 0) {
    for (const auto& [name, w] : weights)
      if (g.owner(name) == me) send(w);
    for (size_t j = 0; j < names.size() && !steps.empty(); ++j)
      if (g.owner(names[j]) == me) {
        std::vector<double> h(1 + kHeader * of_param[j].size(), 0.0);
        h[0] = double(of_param[j].size());
        for (size_t e = 0; e < of_param[j].size(); ++e) {
          const Tensor& t = of_param[j][e].second;
          double* d = h.data() + 1 + kHeader * e;
          d[0] = of_param[j][e].first, d[1] = double(int(t.dtype())), d[2] = t.ndim();
          for (int a = 0; a < t.ndim(); ++a) d[3 + a] = double(t.size(a));
        }
        send(f64_tensor({h[0]}));
        send(f64_tensor(h));
        for (const auto& [k, t] : of_param[j]) send(t);
        send(f64_tensor({steps[j]}));
      }
    return {};
  }
  auto take = [&](const Shape& shape, DType dt, int from) {
    Tensor t = Tensor::empty(shape, dt, dev);
    pp.recv(t, from).wait();
    return t.to(kCPU);
  };
  NoGradGuard no_grad;
  for (const auto& [name, p] : serial->named_parameters()) {
    const int k = g.owner(name);
    Tensor dst = p;
    dst.copy_from(k == 0 ? find_state(weights, name, p.shape()) : take(p.shape(), p.dtype(), k));
  }
  NamedTensors out;
  const std::vector<std::string> all = optimizer_names(*serial);
  const bool fresh = steps.empty();
  std::vector<double> all_steps;
  for (size_t i = 0; i < all.size() && !fresh; ++i) {
    const int k = g.owner(all[i]);
    std::vector<std::pair<int, Tensor>> entries;
    double st = 0;
    if (k == 0) {
      const size_t j = size_t(std::find(names.begin(), names.end(), all[i]) - names.begin());
      entries = of_param.at(j);
      st = steps[j];
    } else {
      const size_t count = size_t(take({1}, DType::f64, k).to_f64_vector()[0]);
      const std::vector<double> h = take({int64_t(1 + kHeader * count)}, DType::f64, k).to_f64_vector();
      for (size_t e = 0; e < count; ++e) {
        const double* d = h.data() + 1 + kHeader * e;
        Shape shape;
        for (int a = 0; a < int(d[2]); ++a) shape.push_back(int64_t(d[3 + a]));
        entries.emplace_back(int(d[0]), take(shape, DType(int(d[1])), k));
      }
      st = take({1}, DType::f64, k).to_f64_vector()[0];
    }
    for (const auto& [kind, t] : entries) out.emplace_back(std::string(kKinds[kind]) + "." + std::to_string(i), t);
    all_steps.push_back(st);
  }
  if (!fresh) out.emplace_back("step", f64_tensor(all_steps));
  out.emplace_back("optimizer_steps", find_state(opt_state, "optimizer_steps", {1}));
  return out;
}

}  // namespace eng::models
