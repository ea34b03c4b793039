// Adafactor: the state, the per-device dispatch and the captured step (see
// optimizer.h); the update is kernels/cpu/adafactor.cpp and
// kernels/cuda/adafactor.cu.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "engine/optim/descriptors.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adafactor.h"
#include "kernels/cuda/adamw.h"

namespace eng {

namespace {
// A tensor as batch x rows x cols (the last two dims); a vector as 1 x 1 x n.
struct Dims {
  int64_t batch = 1, rows = 1, cols = 1;
};
Dims dims_of(const Tensor& p) {
  const Shape& s = p.shape();
  if (s.size() < 2) return {1, 1, p.numel()};
  Dims d{1, s[s.size() - 2], s.back()};
  for (size_t k = 0; k + 2 < s.size(); ++k) d.batch *= s[k];
  return d;
}
}  // namespace

Adafactor::Adafactor(std::vector<ParamGroup> groups, double lr, AdafactorOptions o)
    : Optimizer(std::move(groups), lr), o_(o) {
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params)
      ENGINE_CHECK(p.dtype() == DType::f32, "Adafactor: fp32 parameters only, got ", p.desc());
  ENGINE_CHECK(o.beta1 >= 0 && o.beta1 < 1, "Adafactor: beta1 must be in [0, 1) (0: no first moment), got ", o.beta1);
}

std::string Adafactor::state_note() const {
  return cat("fp32 row + column averages for matrices, full second moments for vectors",
             o_.beta1 > 0 ? ", fp32 exp_avg (beta1)" : "");
}

float Adafactor::rel_lr(const ParamGroup& g, int64_t t) const {
  if (!o_.relative_step) return float(lr_ * g.lr_scale);
  const double min_step = o_.warmup_init ? 1e-6 * double(t) : 1e-2;
  return float(std::min(min_step, 1.0 / std::sqrt(double(t))));
}

void Adafactor::init_state() {
  int64_t stats = 0, chunks = 0, parts = 0;
  Device gpu_dev = kCPU;
  for (const ParamGroup& g : groups_)
    for (const Tensor& p : g.params) {
      Moments s;
      const Shape& sh = p.shape();
      if (factored(p)) {
        const Dims dm = dims_of(p);
        parts += gpu::adafactor_parts(dm.batch, dm.rows, dm.cols);
        s.row = Tensor::zeros(Shape(sh.begin(), sh.end() - 1), DType::f32, p.device());
        Shape cs(sh.begin(), sh.end() - 2);
        cs.push_back(sh.back());
        s.col = Tensor::zeros(cs, DType::f32, p.device());
      } else {
        s.v = Tensor::zeros(sh, DType::f32, p.device());
      }
      if (o_.beta1 > 0) s.m = Tensor::zeros(sh, DType::f32, p.device());
      s_.push_back(s);
      step_.push_back(0);
      if (detail::on_gpu(p)) gpu_dev = p.device();
      stats += dims_of(p).batch + 2;
      chunks += gpu::chunks_of(p.numel());
    }
  if (gpu_dev != kCPU) {
    stats_ = Tensor::zeros({std::max<int64_t>(stats, 1)}, DType::f32, gpu_dev);
    partials_ = Tensor::zeros({std::max<int64_t>(gpu::adafactor_scratch(chunks, parts), 1)}, DType::f32, gpu_dev);
  }
}

void Adafactor::step() { step_impl(nullptr); }

void Adafactor::step(const Tensor& grad_scale) {
  detail::check_grad_scale("Adafactor", grad_scale);
  step_impl(&grad_scale);
}

void Adafactor::step_impl(const Tensor* grad_scale) {
  NoGradGuard ng;
  const bool capture = capturing();
  ENGINE_CHECK(!capture || !s_.empty(), "Adafactor: capture a step only after one eager step (the state must exist)");
  if (s_.empty()) init_state();
  if (!capture) ++t_;
  std::vector<gpu::AdafactorTensor> fused;
  std::vector<std::pair<size_t, size_t>> fused_index;
  int64_t chunks = 0, rows = 0, tiles = 0, parts = 0, stats_at = 0;
  Device gpu_dev = kCPU;
  size_t k = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (Tensor& p : groups_[gi].params) {
      const ParamGroup& g = groups_[gi];
      const Tensor grad = p.grad();
      const size_t i = k++;
      const Dims dm = dims_of(p);
      const int64_t my_stats = stats_at;
      stats_at += dm.batch + 2;
      if (!grad.defined()) continue;
      Moments& s = s_[i];
      const bool fac = s.row.defined();
      if (detail::on_gpu(p)) {
        ENGINE_CHECK(grad.dtype() == DType::f32 && grad.device() == p.device(), "Adafactor: ", p.desc(),
                     " needs an fp32 gradient on its device, got ", grad.desc());
        ENGINE_CHECK(gpu_dev == kCPU || p.device() == gpu_dev, "Adafactor: parameters on two GPU devices");
        gpu_dev = p.device();
        if (!capture) ++step_[i];
        if (p.numel() == 0) continue;
        gpu::AdafactorTensor d{};
        d.param = p.data<float>(), d.grad = grad.data<float>();
        d.row = fac ? s.row.data<float>() : nullptr, d.col = fac ? s.col.data<float>() : nullptr;
        d.v = fac ? nullptr : s.v.data<float>(), d.m = s.m.defined() ? s.m.data<float>() : nullptr;
        d.stats = stats_.data<float>() + my_stats;
        d.batch = dm.batch, d.rows = dm.rows, d.cols = dm.cols, d.n = p.numel();
        d.chunk_begin = chunks, d.row_begin = rows, d.tile_begin = tiles, d.part_begin = parts;
        chunks += gpu::chunks_of(p.numel());
        if (fac) {
          rows += dm.batch * dm.rows, tiles += gpu::adafactor_tiles(dm.batch, dm.cols);
          parts += gpu::adafactor_parts(dm.batch, dm.rows, dm.cols);
        }
        d.beta2t = float(1.0 - std::pow(double(step_[i]), o_.decay_rate));
        d.rel_lr = rel_lr(g, step_[i]);
        d.weight_decay = float(g.weight_decay);
        d.scale_parameter = o_.scale_parameter ? 1 : 0;
        fused.push_back(d);
        fused_index.emplace_back(i, gi);
        continue;
      }
      ENGINE_CHECK(!capture && grad_scale == nullptr, "Adafactor: ", p.desc(),
                   " is not on a GPU device (a device grad_scale and capture are for emu/cuda)");
      const int64_t t = ++step_[i];
      cpu::AdafactorScalars sc{float(1.0 - std::pow(double(t), o_.decay_rate)), rel_lr(g, t)};
      sc.eps1 = float(o_.eps1), sc.eps2 = float(o_.eps2), sc.clip = float(o_.clip);
      sc.weight_decay = float(g.weight_decay), sc.beta1 = float(o_.beta1), sc.scale_parameter = o_.scale_parameter;
      cpu::adafactor_step(p.data<float>(), grad.data<float>(), fac ? s.row.data<float>() : nullptr,
                          fac ? s.col.data<float>() : nullptr, fac ? nullptr : s.v.data<float>(),
                          s.m.defined() ? s.m.data<float>() : nullptr, dm.batch, dm.rows, dm.cols, sc);
    }
  if (fused.empty()) return;
  Tensor d_desc = detail::upload_descriptors(fused, gpu_dev, capture ? &replay_desc_ : nullptr);
  if (capture) replay_params_ = fused_index, replay_d_desc_ = d_desc;  // the graph reads it at every replay
  const gpu::AdafactorConsts kc{float(o_.eps1), float(o_.eps2), float(o_.clip), float(o_.beta1)};
  ENGINE_GPU_CALL(gpu_dev, adafactor_multi_tensor, static_cast<const gpu::AdafactorTensor*>(d_desc.data_ptr()),
                  int(fused.size()), chunks, rows, tiles, parts, kc, partials_.data<float>(),
                  grad_scale ? grad_scale->data<float>() : nullptr, nullptr);
}

void Adafactor::prepare_replay() {
  ENGINE_CHECK(replay_desc_ != nullptr, "Adafactor::prepare_replay: no step was captured");
  ++t_;
  auto* d = reinterpret_cast<gpu::AdafactorTensor*>(replay_desc_->data());
  for (size_t j = 0; j < replay_params_.size(); ++j) {
    const auto [i, gi] = replay_params_[j];
    const int64_t t = ++step_[i];
    d[j].beta2t = float(1.0 - std::pow(double(t), o_.decay_rate));
    d[j].rel_lr = rel_lr(groups_[gi], t);
  }
}

// Names as transformers' state keys: exp_avg_sq_row.i / exp_avg_sq_col.i
// (factored) or exp_avg_sq.i, and exp_avg.i with beta1.
std::vector<std::pair<std::string, Tensor>> Adafactor::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < s_.size(); ++i) {
    if (s_[i].row.defined()) {
      out.emplace_back(cat("exp_avg_sq_row.", i), s_[i].row);
      out.emplace_back(cat("exp_avg_sq_col.", i), s_[i].col);
    } else {
      out.emplace_back(cat("exp_avg_sq.", i), s_[i].v);
    }
    if (s_[i].m.defined()) out.emplace_back(cat("exp_avg.", i), s_[i].m);
  }
  Tensor st = Tensor::empty({int64_t(step_.size())}, DType::f64);
  for (size_t i = 0; i < step_.size(); ++i) st.data<double>()[i] = double(step_[i]);
  out.emplace_back("step", st);
  out.emplace_back("optimizer_steps", Tensor::full({1}, double(t_), DType::f64));
  return out;
}

void Adafactor::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  NoGradGuard ng;
  ENGINE_CHECK(!replay_desc_,
               "Adafactor::load_state after a step was captured in a CUDA graph (load before capturing)");
  s_.clear(), step_.clear();
  t_ = int64_t(find_state(state, "optimizer_steps", {1}).to_f64_vector()[0]);
  // Saved before its first update: no moments yet.
  if (state_is_fresh(state, "exp_avg_sq_row.0") && state_is_fresh(state, "exp_avg_sq.0")) return;
  init_state();
  for (size_t i = 0; i < s_.size(); ++i) {
    Moments& s = s_[i];
    if (s.row.defined()) {
      s.row.copy_from(find_state(state, cat("exp_avg_sq_row.", i), s.row.shape()));
      s.col.copy_from(find_state(state, cat("exp_avg_sq_col.", i), s.col.shape()));
    } else {
      s.v.copy_from(find_state(state, cat("exp_avg_sq.", i), s.v.shape()));
    }
    if (s.m.defined()) s.m.copy_from(find_state(state, cat("exp_avg.", i), s.m.shape()));
  }
  const std::vector<double> sv = find_state(state, "step", {int64_t(step_.size())}).to_f64_vector();
  for (size_t i = 0; i < step_.size(); ++i) step_[i] = int64_t(sv[i]);
}

}  // namespace eng
