// Warmup + decay schedules.
#include "engine/optim/schedule.h"

#include <algorithm>
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

const char* lr_shape_name(LRShape s) {
  switch (s) {
    case LRShape::cosine:
      return "cosine";
    case LRShape::linear:
      return "linear";
    case LRShape::constant:
      return "constant";
    case LRShape::wsd:
      return "wsd";
  }
  return "?";
}

LRShape parse_lr_shape(const std::string& name) {
  for (LRShape s : {LRShape::cosine, LRShape::linear, LRShape::constant, LRShape::wsd})
    if (name == lr_shape_name(s)) return s;
  ENGINE_USER_FAIL("lr_schedule '", name, "': cosine, linear, constant or wsd");
}

WarmupDecayLR::WarmupDecayLR(LRShape shape, double max_lr, double min_lr, int64_t warmup, int64_t total,
                             double decay_fraction)
    : shape_(shape), max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup), total_(total) {
  ENGINE_CHECK(warmup >= 0 && total >= warmup, "lr schedule: need 0 <= warmup (", warmup, ") <= total (", total, ")");
  ENGINE_CHECK(min_lr <= max_lr, "lr schedule: min_lr ", min_lr, " above max_lr ", max_lr);
  ENGINE_CHECK(decay_fraction >= 0 && decay_fraction <= 1, "lr schedule: the wsd decay fraction ", decay_fraction,
               " is not in [0, 1]");
  // The decay's first step: not before the warmup ends.
  decay_start_ = std::max(warmup, total - int64_t(std::llround(decay_fraction * double(total))));
}

double WarmupDecayLR::lr_at(int64_t step) const {
  if (step < warmup_) return max_lr_ * double(step + 1) / double(warmup_);
  if (shape_ == LRShape::constant) return max_lr_;
  if (step >= total_) return min_lr_;
  const int64_t from = shape_ == LRShape::wsd ? decay_start_ : warmup_;
  if (step < from) return max_lr_;  // wsd's stable phase
  const double ratio = double(step - from) / double(std::max<int64_t>(total_ - from, 1));
  const double coeff = shape_ == LRShape::cosine   ? 0.5 * (1.0 + std::cos(3.141592653589793 * ratio))
                       : shape_ == LRShape::linear ? 1.0 - ratio
                                                   : 1.0 - std::sqrt(ratio);
  return min_lr_ + coeff * (max_lr_ - min_lr_);
}

}  // namespace eng
