// Dynamic loss scaling (see loss_scaler.h). The finite check reuses the
// global gradient norm (clip.cpp): a sum of squares is inf or nan as soon as
// one element is, so no separate kernel is needed. (A finite gradient so
// large that its square overflows fp32, |g| > 1.8e19 after unscaling, also
// reads as an overflow; such a step would be useless anyway.)
#include "engine/optim/loss_scaler.h"

#include <cmath>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng {

LossScaler::LossScaler(LossScalerOptions o) : opt_(o), loss_scale_(o.init_scale) {
  ENGINE_CHECK(
      o.init_scale > 0 && o.growth_factor > 1 && o.backoff_factor > 0 && o.backoff_factor < 1 && o.growth_interval > 0,
      "LossScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0");
}

Tensor LossScaler::scale(const Tensor& loss) const { return eng::scale(loss, loss_scale_); }

static std::vector<Tensor> all_params(const Optimizer& opt) {
  std::vector<Tensor> ps;
  for (const ParamGroup& g : opt.groups()) ps.insert(ps.end(), g.params.begin(), g.params.end());
  return ps;
}

double LossScaler::unscale_(Optimizer& opt) {
  if (unscaled_) return norm_;
  NoGradGuard ng;
  const std::vector<Tensor> ps = all_params(opt);
  for (const Tensor& p : ps) {
    Tensor g = p.grad();
    if (g.defined()) eng::scale_(g, 1.0 / loss_scale_);
  }
  norm_ = grad_norm(ps);
  unscaled_ = true;
  return norm_;
}

bool LossScaler::step(Optimizer& opt) {
  const bool finite = std::isfinite(unscale_(opt));
  unscaled_ = false;
  if (!finite) {
    loss_scale_ *= opt_.backoff_factor;
    clean_run_ = 0;
    ++skipped_;
    return false;
  }
  opt.step();
  if (++clean_run_ >= opt_.growth_interval) {
    loss_scale_ *= opt_.growth_factor;
    clean_run_ = 0;
  }
  return true;
}

void LossScaler::load_state(const State& s) {
  ENGINE_CHECK(s.scale > 0 && s.clean_run >= 0 && s.skipped >= 0, "LossScaler: bad saved state (scale ", s.scale,
               ", clean_run ", s.clean_run, ", skipped ", s.skipped, ")");
  loss_scale_ = s.scale;
  clean_run_ = s.clean_run;
  skipped_ = s.skipped;
}

}  // namespace eng
