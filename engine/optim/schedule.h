// Learning-rate schedules: lr_at(step) for a 0-based optimizer step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

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

// The shapes train's --lr_schedule offers, each after the same linear
// warmup (lr (step+1)/warmup for step < warmup), as llm.c's
// llmc/schedulers.h names them:
//   cosine:   cosine decay from lr to min_lr at `total` (WarmupCosineLR);
//   linear:   straight from lr to min_lr at `total`;
//   constant: lr to the end (min_lr unused);
//   wsd:      warmup-stable-decay (Hagele et al. 2024): lr until the last
//             decay_fraction of the steps, then 1 - sqrt down to min_lr at
//             `total`.
// After `total`, min_lr (constant: lr).
enum class LRShape : uint8_t { cosine, linear, constant, wsd };
const char* lr_shape_name(LRShape s);
// "cosine" / "linear" / "constant" / "wsd"; a UserError naming them otherwise.
LRShape parse_lr_shape(const std::string& name);

class WarmupDecayLR : public LRSchedule {
 public:
  WarmupDecayLR(LRShape shape, double max_lr, double min_lr, int64_t warmup, int64_t total,
                double decay_fraction = 0.2);
  double lr_at(int64_t step) const override;

 private:
  LRShape shape_;
  double max_lr_, min_lr_;
  int64_t warmup_, total_, decay_start_;
};

}  // namespace eng
