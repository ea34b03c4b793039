// Learning-rate schedules: lr_at(step) for a 0-based optimizer step.
#pragma once
#include <cstdint>

namespace eng {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
};

class ConstantLR : public LRSchedule {
 public:
  explicit ConstantLR(double lr) : lr_(lr) {}
  double lr_at(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// Linear warmup from lr/warmup to lr over `warmup` steps, then cosine decay
// to min_lr at `total` steps, constant min_lr after (llm.c / nanoGPT).
class WarmupCosineLR : public LRSchedule {
 public:
  WarmupCosineLR(double max_lr, double min_lr, int64_t warmup, int64_t total);
  double lr_at(int64_t step) const override;

 private:
  double max_lr_, min_lr_;
  int64_t warmup_, total_;
};

}  // namespace eng
