// AdamW: decoupled weight decay and bias correction, as torch.optim.AdamW.
// cpu parameters: one kernels/cpu/optim.cpp loop per tensor. emu/cuda
// parameters (fp32 master weights): all of them in ONE launch of the fused
// multi-tensor kernel (kernels/cuda/adamw.cu), from a descriptor array built
// here and copied to the device each step.
#include <cmath>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/ops/op_common.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adamw.h"

namespace eng {

AdamW::AdamW(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps)
    : Optimizer(std::move(groups), lr), beta1_(beta1), beta2_(beta2), eps_(eps) {}

void AdamW::init_state() {
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      m_.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
      v_.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
      step_.push_back(0);
    }
}

void AdamW::step() {
  NoGradGuard ng;
  if (m_.empty()) init_state();
  ++t_;
  std::vector<gpu::AdamWTensor> fused;  // the emu/cuda parameters, for one launch
  Device gpu_dev = kCPU;
  size_t k = 0;
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) {
      Tensor grad = p.grad();
      const size_t i = k++;
      if (!grad.defined()) continue;  // unused this step: torch skips it and its step count
      const double t = double(++step_[i]);
      const double bc1 = 1.0 - std::pow(beta1_, t), bc2 = 1.0 - std::pow(beta2_, t);
      const double lr = lr_ * g.lr_scale;
      if (detail::on_gpu(p)) {
        ENGINE_CHECK(p.dtype() == DType::f32 && grad.dtype() == DType::f32 && grad.device() == p.device(), "AdamW: on ",
                     p.device().str(),
                     " parameters are fp32 master weights with fp32 gradients on "
                     "the same device; got ",
                     p.desc(), " with gradient ", grad.desc());
        ENGINE_CHECK(fused.empty() || p.device() == gpu_dev, "AdamW: parameters on two GPU devices (", gpu_dev.str(),
                     " and ", p.device().str(), ")");
        gpu_dev = p.device();
        if (p.numel() == 0) continue;
        // The same fp32 constants as cpu::adamw_step computes, so emu matches cpu exactly.
        const int64_t begin = fused.empty() ? 0 : fused.back().chunk_begin + gpu::chunks_of(fused.back().n);
        fused.push_back({p.data<float>(), grad.data<float>(), m_[i].data<float>(), v_[i].data<float>(), nullptr,
                         p.numel(), begin, float(1.0 - lr * g.weight_decay), float(lr / bc1), float(std::sqrt(bc2)),
                         0.f});
        continue;
      }
      if (p.dtype() == DType::f64)
        cpu::adamw_step(p.data<double>(), grad.data<double>(), m_[i].data<double>(), v_[i].data<double>(), p.numel(),
                        lr, beta1_, beta2_, eps_, g.weight_decay, bc1, bc2);
      else
        cpu::adamw_step(p.data<float>(), grad.data<float>(), m_[i].data<float>(), v_[i].data<float>(), p.numel(), lr,
                        beta1_, beta2_, eps_, g.weight_decay, bc1, bc2);
    }
  if (fused.empty()) return;
  // The descriptors travel in an i32 tensor on the device (8-byte aligned: the
  // allocator aligns every buffer), then one launch updates every parameter.
  static_assert(sizeof(gpu::AdamWTensor) % 4 == 0);
  const size_t bytes = fused.size() * sizeof(gpu::AdamWTensor);
  Tensor d_desc = Tensor::empty({int64_t(bytes / 4)}, DType::i32, gpu_dev);
  copy_bytes(d_desc.data_ptr(), gpu_dev, fused.data(), kCPU, bytes);
  const int64_t chunks = fused.back().chunk_begin + gpu::chunks_of(fused.back().n);
  ENGINE_GPU_CALL(gpu_dev, adamw_multi_tensor, static_cast<const gpu::AdamWTensor*>(d_desc.data_ptr()),
                  int(fused.size()), chunks, float(beta1_), float(beta2_), float(eps_), nullptr);
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, Tensor>> s;
  for (size_t i = 0; i < m_.size(); ++i) {
    s.emplace_back("exp_avg." + std::to_string(i), m_[i]);
    s.emplace_back("exp_avg_sq." + std::to_string(i), v_[i]);
  }
  // Step counts as f64: exact up to 2^53 and storable in safetensors.
  Tensor st = Tensor::empty({int64_t(step_.size())}, DType::f64);
  for (size_t i = 0; i < step_.size(); ++i) st.data<double>()[i] = double(step_[i]);
  s.emplace_back("step", st);
  Tensor total = Tensor::full({1}, double(t_), DType::f64);
  s.emplace_back("optimizer_steps", total);
  return s;
}

void AdamW::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  NoGradGuard ng;
  m_.clear(), v_.clear(), step_.clear();
  t_ = int64_t(find_state(state, "optimizer_steps", {1}).to_f64_vector()[0]);
  // An optimizer saved before its first update (e.g. every fp16 step so far
  // skipped by the loss scaler) has no moments yet: stay that way.
  if (state_is_fresh(state, "exp_avg.0")) return;
  init_state();
  for (size_t i = 0; i < m_.size(); ++i) {
    m_[i].copy_from(find_state(state, "exp_avg." + std::to_string(i), m_[i].shape()));
    v_[i].copy_from(find_state(state, "exp_avg_sq." + std::to_string(i), v_[i].shape()));
  }
  const Tensor& st = find_state(state, "step", {int64_t(step_.size())});
  const std::vector<double> sv = st.to_f64_vector();
  for (size_t i = 0; i < step_.size(); ++i) step_[i] = int64_t(sv[i]);
}

}  // namespace eng
