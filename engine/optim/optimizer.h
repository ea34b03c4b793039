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
#include "kernels/cuda/adamw.h"

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
  // GPU parameters only: every gradient is first multiplied by the device
  // scalar grad_scale (clip_coefficient's factor), with no host round trip.
  void step(const Tensor& grad_scale);
  // CUDA graphs (engine/graph.h): step() inside a capture records the update
  // of the *next* step without changing any host state; before each replay,
  // prepare_replay() advances the step counts and writes that step's lr and
  // bias corrections into the descriptors the graph uploads. One eager step
  // must come first (the moments must exist before the capture).
  void prepare_replay();
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 private:
  void init_state();
  void step_impl(const Tensor* grad_scale);
  void set_step_scalars(gpu::AdamWTensor& d, const ParamGroup& g, int64_t t) const;
  double beta1_, beta2_, eps_;
  std::vector<Tensor> m_, v_;  // flat over groups, in order
  std::vector<int64_t> step_;  // per parameter, as torch: a step without a gradient does not count
  // The captured step (prepare_replay): its descriptors, their (parameter, group), their device copy.
  std::shared_ptr<std::vector<uint8_t>> replay_desc_;
  std::vector<std::pair<size_t, size_t>> replay_params_;
  Tensor replay_d_desc_;
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

// The same clipping without a host round trip, for gradients on one GPU
// device: returns a device f32 (2) = {norm, factor}, factor = the clip
// coefficient (1 when within max_norm or max_norm <= 0), for
// AdamW::step(grad_scale) on a slice of it. The gradients are not changed.
// Capturable in a CUDA graph (engine/graph.h).
Tensor clip_coefficient(const std::vector<Tensor>& params, double max_norm);
// Its two halves, for gradients split over ranks (ZeRO, comm/zero.h): the
// sum of squares of the gradients on `dev` (a device f32 scalar; zero when
// none has a gradient), which the caller all-reduces, then {norm, factor}
// from the total. Both capturable.
Tensor grad_sum_squares(const std::vector<Tensor>& params, Device dev);
Tensor clip_coefficient_from(const Tensor& sum_squares, double max_norm);

}  // namespace eng
