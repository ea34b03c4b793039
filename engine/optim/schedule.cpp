// Warmup + cosine schedule.
#include "engine/optim/schedule.h"

#include <cmath>

#include "base/error.h"

namespace eng {

WarmupCosineLR::WarmupCosineLR(double max_lr, double min_lr, int64_t warmup, int64_t total)
    : max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup), total_(total) {
  ENGINE_CHECK(warmup >= 0 && total >= warmup, "WarmupCosineLR: need 0 <= warmup (", warmup, ") <= total (", total,
               ")");
  ENGINE_CHECK(min_lr <= max_lr, "WarmupCosineLR: min_lr ", min_lr, " above max_lr ", max_lr);
}

double WarmupCosineLR::lr_at(int64_t step) const {
  if (step < warmup_) return max_lr_ * double(step + 1) / double(warmup_);
  if (step >= total_) return min_lr_;
  const double ratio = double(step - warmup_) / double(std::max<int64_t>(total_ - warmup_, 1));
  const double coeff = 0.5 * (1.0 + std::cos(3.141592653589793 * ratio));
  return min_lr_ + coeff * (max_lr_ - min_lr_);
}

}  // namespace eng
