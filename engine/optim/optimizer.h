// Optimizers over parameter groups, as torch.optim: each group has its own
// weight decay (GPT-2 decays matrices, not biases or layernorm gains) and an
// lr multiplier. State (moments, momentum buffers) is allocated lazily at the
// first step, in the parameter's dtype and on its device.
// All updates run under no_grad and write parameters in place.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace eng {

struct ParamGroup {
  std::vector<Tensor> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;
};

// Looks a tensor up by name in a state list; the error names the entry.
const Tensor& find_state(const std::vector<std::pair<std::string, Tensor>>& state, const std::string& name,
                         const Shape& shape);

// True when a saved state list lacks `first_entry` although the optimizer has
// parameters: it was saved before any update allocated its state.
bool state_is_fresh(const std::vector<std::pair<std::string, Tensor>>& state, const std::string& first_entry);

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  int64_t steps() const { return t_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }
  // Named state tensors ("exp_avg.3" ...) for checkpoints.
  // steps() counts step() calls; per-parameter counts may be lower.
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  // Restores what state() returned (by name); errors name a missing or
  // mis-shaped entry. Used by --resume.
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& state) = 0;

 protected:
  std::vector<ParamGroup> groups_;
  double lr_;
  int64_t t_ = 0;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 private:
  void init_state();
  double beta1_, beta2_, eps_;
  std::vector<Tensor> m_, v_;  // flat over groups, in order
  std::vector<int64_t> step_;  // per parameter, as torch: a step without a gradient does not count
};

enum class Nesterov : uint8_t { no, yes };

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, double lr, double momentum = 0.0, double dampening = 0.0,
      Nesterov nesterov = Nesterov::no);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 private:
  void init_state();
  double momentum_, dampening_;
  Nesterov nesterov_;
  std::vector<Tensor> buf_;
  std::vector<bool> has_buf_;  // torch starts a parameter's buffer at its first gradient
};

// Splits parameters the GPT-2 way: tensors with 2 or more dims get weight
// decay, vectors (biases, layernorm) do not.
std::vector<ParamGroup> decay_groups(const std::vector<Tensor>& params, double weight_decay);

// Scales all gradients so their global L2 norm is at most max_norm
// (torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), capped at 1).
// Returns the norm before clipping. max_norm <= 0 only measures.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
double grad_norm(const std::vector<Tensor>& params);

}  // namespace eng
