// AdamW: decoupled weight decay and bias correction, as torch.optim.AdamW.
// cpu parameters: one kernels/cpu/optim.cpp loop per tensor. emu/cuda
// parameters (fp32 master weights): all of them in ONE launch of the fused
// multi-tensor kernel (kernels/cuda/adamw.cu), from a descriptor array built
// here and copied to the device each step; the kernel also rewrites each
// master's kept bf16 copy when there is one (set_compute_copies). The step can be captured in a
// CUDA graph (engine/graph.h): see step(grad_scale) and prepare_replay().
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/compute_copies.h"
#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "engine/optim/descriptors.h"
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

void AdamW::step() { step_impl(nullptr); }

void AdamW::step(const Tensor& grad_scale) {
  detail::check_grad_scale("AdamW", grad_scale);
  step_impl(&grad_scale);
}

// The per-step constants of a fused descriptor, for a parameter of group g at
// its step count t: computed in double and rounded to fp32, exactly as
// cpu::adamw_step computes them, so emu matches cpu bit for bit.
void AdamW::set_step_scalars(gpu::AdamWTensor& d, const ParamGroup& g, int64_t t) const {
  const AdamConstants c = adam_constants(lr_ * g.lr_scale, g.weight_decay, beta1_, beta2_, t);
  d.decay = c.decay, d.step_size = c.step_size, d.sqrt_bc2 = c.sqrt_bc2;
}

void AdamW::step_impl(const Tensor* grad_scale) {
  NoGradGuard ng;
  const bool capture = capturing();
  // Zeroing the moments inside a graph would zero them at every replay.
  ENGINE_CHECK(!capture || !m_.empty(), "AdamW: capture a step only after one eager step (the state must exist)");
  if (m_.empty()) init_state();
  if (!capture) ++t_;
  std::vector<gpu::AdamWTensor> fused;                 // the emu/cuda parameters, for one launch
  std::vector<std::pair<size_t, size_t>> fused_index;  // their (position in m_/v_/step_, group)
  Device gpu_dev = kCPU;
  size_t k = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (Tensor& p : groups_[gi].params) {
      const ParamGroup& g = groups_[gi];
      Tensor grad = p.grad();
      const size_t i = k++;
      if (!grad.defined()) continue;  // unused this step: torch skips it and its step count
      if (detail::on_gpu(p)) {
        ENGINE_CHECK(p.dtype() == DType::f32 && grad.dtype() == DType::f32 && grad.device() == p.device(), "AdamW: on ",
                     p.device().str(),
                     " parameters are fp32 master weights with fp32 gradients on "
                     "the same device; got ",
                     p.desc(), " with gradient ", grad.desc());
        ENGINE_CHECK(fused.empty() || p.device() == gpu_dev, "AdamW: parameters on two GPU devices (", gpu_dev.str(),
                     " and ", p.device().str(), ")");
        gpu_dev = p.device();
        if (!capture) ++step_[i];
        if (p.numel() == 0) continue;
        const int64_t begin = fused.empty() ? 0 : fused.back().chunk_begin + gpu::chunks_of(fused.back().n);
        fused.push_back({p.data<float>(), grad.data<float>(), m_[i].data<float>(), v_[i].data<float>(),
                         copies_ ? copies_->written_by_optimizer(p) : nullptr, p.numel(), begin, 0.f, 0.f, 0.f, 0.f});
        // Captured, the constants are placeholders: prepare_replay() writes each replay's.
        set_step_scalars(fused.back(), g, step_[i]);
        fused_index.emplace_back(i, gi);
        continue;
      }
      ENGINE_CHECK(!capture, "AdamW: ", p.desc(), " is not on a GPU device; only emu/cuda steps can be captured");
      const double t = double(++step_[i]);
      const double bc1 = 1.0 - std::pow(beta1_, t), bc2 = 1.0 - std::pow(beta2_, t);
      const double lr = lr_ * g.lr_scale;
      ENGINE_CHECK(grad_scale == nullptr, "AdamW::step(grad_scale) is for GPU parameters, got ", p.desc());
      if (p.dtype() == DType::f64)
        cpu::adamw_step(p.data<double>(), grad.data<double>(), m_[i].data<double>(), v_[i].data<double>(), p.numel(),
                        lr, beta1_, beta2_, eps_, g.weight_decay, bc1, bc2);
      else
        cpu::adamw_step(p.data<float>(), grad.data<float>(), m_[i].data<float>(), v_[i].data<float>(), p.numel(), lr,
                        beta1_, beta2_, eps_, g.weight_decay, bc1, bc2);
    }
  if (fused.empty()) return;
  // The descriptors travel in an i32 tensor on the device (8-byte aligned: the
  // allocator aligns every buffer), uploaded in stream order (graph.h), then
  // one launch updates every parameter. Captured, the upload reads
  // replay_desc_, which prepare_replay() rewrites before every replay.
  Tensor d_desc = detail::upload_descriptors(fused, gpu_dev, capture ? &replay_desc_ : nullptr);
  if (capture) replay_params_ = fused_index, replay_d_desc_ = d_desc;  // the graph reads it at every replay
  const int64_t chunks = fused.back().chunk_begin + gpu::chunks_of(fused.back().n);
  // The step profile's cost: the kernel's twin's, plus the bf16 copies it
  // writes (2 bytes an element), which the twin cannot see (the descriptors
  // are on the device).
  kprof::Scope profiled;
  if (kprof::listening()) {
    kprof::Cost cost = kcost::adamw_multi_tensor(nullptr, int(fused.size()), chunks, 0.f, 0.f, 0.f, nullptr, nullptr);
    for (const gpu::AdamWTensor& d : fused) cost.bytes += d.param_bf16 ? 2.0 * double(d.n) : 0.0;
    profiled.begin("adamw_multi_tensor", cost);
  }
  ENGINE_GPU_CALL(gpu_dev, adamw_multi_tensor, static_cast<const gpu::AdamWTensor*>(d_desc.data_ptr()),
                  int(fused.size()), chunks, float(beta1_), float(beta2_), float(eps_),
                  grad_scale ? grad_scale->data<float>() : nullptr, nullptr);
}

void AdamW::prepare_replay() {
  ENGINE_CHECK(replay_desc_ != nullptr, "AdamW::prepare_replay: no step was captured");
  ++t_;
  auto* d = reinterpret_cast<gpu::AdamWTensor*>(replay_desc_->data());
  for (size_t j = 0; j < replay_params_.size(); ++j) {
    const auto [i, gi] = replay_params_[j];
    set_step_scalars(d[j], groups_[gi], ++step_[i]);
  }
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
  // A captured step writes the moments it saw at capture: new ones would be orphaned.
  ENGINE_CHECK(!replay_desc_, "AdamW::load_state after a step was captured in a CUDA graph (load before capturing)");
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
