// SGD with momentum, dampening, Nesterov and coupled weight decay, as torch.optim.SGD.
#include "base/error.h"
#include "engine/autograd.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, double dampening, Nesterov nesterov)
    : Optimizer(std::move(groups), lr), momentum_(momentum), dampening_(dampening), nesterov_(nesterov) {
  ENGINE_CHECK(nesterov == Nesterov::no || (momentum > 0 && dampening == 0),
               "SGD: Nesterov needs momentum > 0 and zero dampening");
}

void SGD::init_state() {
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      buf_.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
      has_buf_.push_back(false);
    }
}

void SGD::step() {
  NoGradGuard ng;
  if (buf_.empty()) init_state();
  ++t_;
  size_t k = 0;
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) {
      Tensor grad = p.grad();
      const size_t i = k++;
      if (!grad.defined()) continue;
      ENGINE_CHECK(p.device().type == DeviceType::cpu, "SGD: no kernel for ", p.desc(), " yet");
      const double lr = lr_ * g.lr_scale;
      const bool nest = nesterov_ == Nesterov::yes;
      const bool first = !has_buf_[i];
      has_buf_[i] = true;
      if (p.dtype() == DType::f64)
        cpu::sgd_step(p.data<double>(), grad.data<double>(), buf_[i].data<double>(), p.numel(), lr, momentum_,
                      dampening_, g.weight_decay, nest, first);
      else
        cpu::sgd_step(p.data<float>(), grad.data<float>(), buf_[i].data<float>(), p.numel(), lr, momentum_, dampening_,
                      g.weight_decay, nest, first);
    }
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  std::vector<std::pair<std::string, Tensor>> s;
  for (size_t i = 0; i < buf_.size(); ++i) s.emplace_back("momentum_buffer." + std::to_string(i), buf_[i]);
  Tensor has = Tensor::empty({int64_t(has_buf_.size())}, DType::f64);
  for (size_t i = 0; i < has_buf_.size(); ++i) has.data<double>()[i] = has_buf_[i] ? 1.0 : 0.0;
  s.emplace_back("has_buffer", has);
  s.emplace_back("optimizer_steps", Tensor::full({1}, double(t_), DType::f64));
  return s;
}

void SGD::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  NoGradGuard ng;
  buf_.clear(), has_buf_.clear();
  t_ = int64_t(find_state(state, "optimizer_steps", {1}).to_f64_vector()[0]);
  if (state_is_fresh(state, "momentum_buffer.0")) return;  // saved before its first update
  init_state();
  for (size_t i = 0; i < buf_.size(); ++i)
    buf_[i].copy_from(find_state(state, "momentum_buffer." + std::to_string(i), buf_[i].shape()));
  const std::vector<double> has = find_state(state, "has_buffer", {int64_t(has_buf_.size())}).to_f64_vector();
  for (size_t i = 0; i < has_buf_.size(); ++i) has_buf_[i] = has[i] != 0.0;
}

}  // namespace eng
