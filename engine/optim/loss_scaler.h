// Dynamic loss scaling for fp16 training, as torch.cuda.amp.GradScaler.
// fp16 has a 5-bit exponent: gradients below ~6e-8 flush to zero. Multiplying
// the loss by a large scale S shifts every gradient up by S so they stay
// representable; the fp32 gradients are divided by S again before the step.
// If any gradient is inf/nan (S was too large: something overflowed fp16),
// the step is skipped and S is multiplied by backoff_factor; after
// growth_interval clean steps in a row S is multiplied by growth_factor.
// Usage, per optimizer step:
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);           // optional: before clipping the real gradients
//   clip_grad_norm(...);            // only meaningful when unscale_ returned a finite norm
//   bool stepped = scaler.step(opt);  // unscales if not done yet, steps or skips, updates S
#pragma once
#include <cstdint>

#include "engine/optim/optimizer.h"

namespace eng {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps before the scale grows
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions o = {});
  Tensor scale(const Tensor& loss) const;  // loss * S, recorded
  // Divides every gradient of opt's parameters by S (once per step) and
  // returns their global L2 norm after unscaling: inf/nan when any element is
  // (the finite check: a cpu loop, or the multi-tensor norm kernel on emu/cuda).
  double unscale_(Optimizer& opt);
  // Steps opt when the gradients are finite; then updates S. Returns whether
  // it stepped. A skipped step leaves the parameters and optimizer state untouched.
  bool step(Optimizer& opt);
  double get_scale() const { return loss_scale_; }
  int64_t skipped_steps() const { return skipped_; }
  const LossScalerOptions& options() const { return opt_; }
  // What a checkpoint must keep for a resumed fp16 run to match an
  // uninterrupted one: the scale and the clean-step run towards growth.
  struct State {
    double scale;
    int64_t clean_run, skipped;
  };
  State state() const { return {loss_scale_, clean_run_, skipped_}; }
  void load_state(const State& s);

 private:
  LossScalerOptions opt_;
  double loss_scale_;
  int64_t clean_run_ = 0;  // consecutive finite steps since the last growth or backoff
  int64_t skipped_ = 0;
  bool unscaled_ = false;  // unscale_ already ran this step
  double norm_ = 0;        // its result
};

}  // namespace eng
