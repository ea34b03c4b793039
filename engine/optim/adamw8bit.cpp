// 8-bit AdamW: the state, the per-device dispatch and the captured step (see
// optimizer.h); the update itself is kernels/cpu/optim8bit.cpp and
// kernels/cuda/adamw8bit.cu.
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "engine/optim/descriptors.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/adamw8bit.h"

namespace eng {

namespace {
// The two maps, built once: signed (m) then unsigned (v).
const std::array<float, 512>& host_maps() {
  static const std::array<float, 512> maps = [] {
    std::array<float, 512> a{};
    const std::array<float, 256> s = cpu::dynamic_map(true), u = cpu::dynamic_map(false);
    std::copy(s.begin(), s.end(), a.begin());
    std::copy(u.begin(), u.end(), a.begin() + 256);
    return a;
  }();
  return maps;
}

}  // namespace

AdamW8bit::AdamW8bit(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps,
                     int64_t min_8bit)
    : Optimizer(std::move(groups), lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      ENGINE_CHECK(p.dtype() == DType::f32, "AdamW8bit: fp32 parameters only, got ", p.desc());
      quantized_.push_back(p.numel() >= min_8bit);
    }
}

void AdamW8bit::set_quantized(std::vector<bool> quantized) {
  ENGINE_CHECK(quantized.size() == quantized_.size() && s_.empty(),
               "AdamW8bit::set_quantized: one flag per parameter, before the first step");
  quantized_ = std::move(quantized);
}

std::string AdamW8bit::state_note() const {
  int64_t q = 0, f = 0;
  size_t k = 0;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) (quantized_[k++] ? q : f) += p.numel();
  return cat("8-bit codes + an fp32 absmax per 256 for ", q, " elements, fp32 moments for ", f,
             " (tensors under 4096)");
}

void AdamW8bit::init_state() {
  size_t k = 0;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      Moments s;
      if (quantized_[k]) {
        const int64_t blocks = gpu::quant_blocks(p.numel());
        s.m = Tensor::zeros({p.numel()}, DType::u8, p.device());
        s.v = Tensor::zeros({p.numel()}, DType::u8, p.device());
        s.m_absmax = Tensor::zeros({blocks}, DType::f32, p.device());
        s.v_absmax = Tensor::zeros({blocks}, DType::f32, p.device());
      } else {
        s.m = Tensor::zeros(p.shape(), DType::f32, p.device());
        s.v = Tensor::zeros(p.shape(), DType::f32, p.device());
      }
      s_.push_back(s);
      step_.push_back(0);
      ++k;
      if (detail::on_gpu(p) && !maps_.defined()) {
        maps_ = Tensor::from_vector(std::vector<float>(host_maps().begin(), host_maps().end()), {512}, DType::f32,
                                    p.device());
      }
    }
}

void AdamW8bit::step() { step_impl(nullptr); }

void AdamW8bit::step(const Tensor& grad_scale) {
  detail::check_grad_scale("AdamW8bit", grad_scale);
  step_impl(&grad_scale);
}

void AdamW8bit::step_impl(const Tensor* grad_scale) {
  NoGradGuard ng;
  const bool capture = capturing();
  ENGINE_CHECK(!capture || !s_.empty(), "AdamW8bit: capture a step only after one eager step (the state must exist)");
  if (s_.empty()) init_state();
  if (!capture) ++t_;
  std::vector<gpu::Adam8bitTensor> q;
  std::vector<gpu::AdamWTensor> f;
  std::vector<std::pair<size_t, size_t>> q_index, f_index;
  Device gpu_dev = kCPU;
  size_t k = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (Tensor& p : groups_[gi].params) {
      const ParamGroup& g = groups_[gi];
      const Tensor grad = p.grad();
      const size_t i = k++;
      if (!grad.defined()) continue;
      Moments& s = s_[i];
      if (detail::on_gpu(p)) {
        ENGINE_CHECK(grad.dtype() == DType::f32 && grad.device() == p.device(), "AdamW8bit: ", p.desc(),
                     " needs an fp32 gradient on its device, got ", grad.desc());
        ENGINE_CHECK(gpu_dev == kCPU || p.device() == gpu_dev, "AdamW8bit: parameters on two GPU devices");
        gpu_dev = p.device();
        if (!capture) ++step_[i];
        if (p.numel() == 0) continue;
        const AdamConstants c = adam_constants(lr_ * g.lr_scale, g.weight_decay, beta1_, beta2_, step_[i]);
        if (quantized_[i]) {
          const int64_t begin = q.empty() ? 0 : q.back().block_begin + gpu::quant_blocks(q.back().n);
          q.push_back({p.data<float>(), grad.data<float>(), s.m.data<uint8_t>(), s.m_absmax.data<float>(),
                       s.v.data<uint8_t>(), s.v_absmax.data<float>(), p.numel(), begin, c.decay, c.step_size,
                       c.sqrt_bc2, 0.f});
          q_index.emplace_back(i, gi);
        } else {
          const int64_t begin = f.empty() ? 0 : f.back().chunk_begin + gpu::chunks_of(f.back().n);
          f.push_back({p.data<float>(), grad.data<float>(), s.m.data<float>(), s.v.data<float>(), nullptr, p.numel(),
                       begin, c.decay, c.step_size, c.sqrt_bc2, 0.f});
          f_index.emplace_back(i, gi);
        }
        continue;
      }
      ENGINE_CHECK(!capture && grad_scale == nullptr, "AdamW8bit: ", p.desc(),
                   " is not on a GPU device (a device grad_scale and capture are for emu/cuda)");
      const AdamConstants c = adam_constants(lr_ * g.lr_scale, g.weight_decay, beta1_, beta2_, ++step_[i]);
      if (quantized_[i]) {
        const cpu::Adam8bitScalars sc{float(beta1_), float(beta2_), float(eps_), c.decay, c.step_size, c.sqrt_bc2};
        cpu::adamw8bit_step(p.data<float>(), grad.data<float>(), s.m.data<uint8_t>(), s.m_absmax.data<float>(),
                            s.v.data<uint8_t>(), s.v_absmax.data<float>(), p.numel(), host_maps().data(),
                            host_maps().data() + 256, sc);
      } else {
        const double t = double(step_[i]);
        cpu::adamw_step(p.data<float>(), grad.data<float>(), s.m.data<float>(), s.v.data<float>(), p.numel(),
                        lr_ * g.lr_scale, beta1_, beta2_, eps_, g.weight_decay, 1.0 - std::pow(beta1_, t),
                        1.0 - std::pow(beta2_, t));
      }
    }
  const float* gs = grad_scale ? grad_scale->data<float>() : nullptr;
  if (!q.empty()) {
    Replay& r = replay_q_;
    Tensor d = detail::upload_descriptors(q, gpu_dev, capture ? &r.desc : nullptr);
    if (capture) r.params = q_index, r.d_desc = d;  // the graph reads it at every replay
    ENGINE_GPU_CALL(gpu_dev, adamw8bit_multi_tensor, static_cast<const gpu::Adam8bitTensor*>(d.data_ptr()),
                    int(q.size()), q.back().block_begin + gpu::quant_blocks(q.back().n), maps_.data<float>(),
                    float(beta1_), float(beta2_), float(eps_), gs, nullptr);
  }
  if (!f.empty()) {
    Replay& r = replay_f_;
    Tensor d = detail::upload_descriptors(f, gpu_dev, capture ? &r.desc : nullptr);
    if (capture) r.params = f_index, r.d_desc = d;
    ENGINE_GPU_CALL(gpu_dev, adamw_multi_tensor, static_cast<const gpu::AdamWTensor*>(d.data_ptr()), int(f.size()),
                    f.back().chunk_begin + gpu::chunks_of(f.back().n), float(beta1_), float(beta2_), float(eps_), gs,
                    nullptr);
  }
}

void AdamW8bit::prepare_replay() {
  ENGINE_CHECK(replay_q_.desc || replay_f_.desc, "AdamW8bit::prepare_replay: no step was captured");
  ++t_;
  // Each parameter is in one of the two lists: advance its count once.
  auto rewrite = [&](Replay& r, auto* d) {
    if (!r.desc) return;
    for (size_t j = 0; j < r.params.size(); ++j) {
      const auto [i, gi] = r.params[j];
      const ParamGroup& g = groups_[gi];
      const AdamConstants c = adam_constants(lr_ * g.lr_scale, g.weight_decay, beta1_, beta2_, ++step_[i]);
      d[j].decay = c.decay, d[j].step_size = c.step_size, d[j].sqrt_bc2 = c.sqrt_bc2;
    }
  };
  if (replay_q_.desc) rewrite(replay_q_, reinterpret_cast<gpu::Adam8bitTensor*>(replay_q_.desc->data()));
  if (replay_f_.desc) rewrite(replay_f_, reinterpret_cast<gpu::AdamWTensor*>(replay_f_.desc->data()));
}

// Names: a quantized parameter i has exp_avg.i and exp_avg_sq.i (u8 codes,
// n) with exp_avg_absmax.i and exp_avg_sq_absmax.i (f32, blocks); the others
// exp_avg.i and exp_avg_sq.i in fp32, as AdamW.
std::vector<std::pair<std::string, Tensor>> AdamW8bit::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < s_.size(); ++i) {
    out.emplace_back(cat("exp_avg.", i), s_[i].m);
    out.emplace_back(cat("exp_avg_sq.", i), s_[i].v);
    if (quantized_[i]) {
      out.emplace_back(cat("exp_avg_absmax.", i), s_[i].m_absmax);
      out.emplace_back(cat("exp_avg_sq_absmax.", i), s_[i].v_absmax);
    }
  }
  Tensor st = Tensor::empty({int64_t(step_.size())}, DType::f64);
  for (size_t i = 0; i < step_.size(); ++i) st.data<double>()[i] = double(step_[i]);
  out.emplace_back("step", st);
  out.emplace_back("optimizer_steps", Tensor::full({1}, double(t_), DType::f64));
  return out;
}

void AdamW8bit::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  NoGradGuard ng;
  ENGINE_CHECK(!replay_q_.desc && !replay_f_.desc,
               "AdamW8bit::load_state after a step was captured in a CUDA graph (load before capturing)");
  s_.clear(), step_.clear();
  t_ = int64_t(find_state(state, "optimizer_steps", {1}).to_f64_vector()[0]);
  if (state_is_fresh(state, "exp_avg.0")) return;
  init_state();
  for (size_t i = 0; i < s_.size(); ++i) {
    Moments& s = s_[i];
    for (auto [name, t] : {std::pair{"exp_avg", &s.m}, std::pair{"exp_avg_sq", &s.v}}) {
      const Tensor& src = find_state(state, cat(name, ".", i), t->shape());
      ENGINE_CHECK(src.dtype() == t->dtype(), "optimizer state '", name, ".", i, "' is ", src.desc(),
                   ", 8-bit AdamW keeps ", dtype_name(t->dtype()), " there");
      t->copy_from(src);
    }
    if (quantized_[i]) {
      s.m_absmax.copy_from(find_state(state, cat("exp_avg_absmax.", i), s.m_absmax.shape()));
      s.v_absmax.copy_from(find_state(state, cat("exp_avg_sq_absmax.", i), s.v_absmax.shape()));
    }
  }
  const std::vector<double> sv = find_state(state, "step", {int64_t(step_.size())}).to_f64_vector();
  for (size_t i = 0; i < step_.size(); ++i) step_[i] = int64_t(sv[i]);
}

}  // namespace eng
