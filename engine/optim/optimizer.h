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
class ComputeCopies;  // engine/compute_copies.h

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
  // emu/cuda parameters: the step with every gradient first multiplied by
  // the device scalar grad_scale (clip_coefficient's factor), no host read.
  // Optimizers without a GPU kernel refuse.
  virtual void step(const Tensor& grad_scale);
  // CUDA graphs (engine/graph.h): a step() inside a capture records the
  // update of the *next* step without changing host state; before each
  // replay, prepare_replay() advances the step counts and writes that step's
  // constants into the descriptors the graph uploads.
  virtual void prepare_replay();
  virtual const char* name() const = 0;        // "adamw", "adamw8bit", ... (--optimizer's value)
  virtual std::string state_note() const = 0;  // what its per-parameter state is, for the memory report
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

// AdamW's per-step constants for a parameter at its step count t, computed in
// double and rounded to fp32 as every AdamW kernel (cpu, fused, 8-bit) uses them.
struct AdamConstants {
  float decay, step_size, sqrt_bc2;
};
AdamConstants adam_constants(double lr, double weight_decay, double beta1, double beta2, int64_t t);

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  void step() override;
  // A captured step needs one eager step first (the moments must exist before the capture).
  void step(const Tensor& grad_scale) override;
  void prepare_replay() override;
  const char* name() const override { return "adamw"; }
  std::string state_note() const override { return "fp32 exp_avg + exp_avg_sq"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;
  // emu/cuda: also write each updated master into its kept bf16 copy, if it
  // has one (engine/compute_copies.h), from the same register: the next
  // forward reads the copy without a cast. Set before the first step.
  void set_compute_copies(const ComputeCopies* copies) { copies_ = copies; }

 private:
  void init_state();
  void step_impl(const Tensor* grad_scale);
  void set_step_scalars(gpu::AdamWTensor& d, const ParamGroup& g, int64_t t) const;
  const ComputeCopies* copies_ = nullptr;
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
  using Optimizer::step;
  void step() override;
  const char* name() const override { return "sgd"; }
  std::string state_note() const override { return "fp32 momentum buffer"; }
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 private:
  void init_state();
  double momentum_, dampening_;
  Nesterov nesterov_;
  std::vector<Tensor> buf_;
  std::vector<bool> has_buf_;  // torch starts a parameter's buffer at its first gradient
};

// 8-bit AdamW (Dettmers et al. 2022; bitsandbytes' AdamW8bit with
// block-wise quantization): both moments as 1-byte codes into the dynamic
// maps (kernels/cpu/optim8bit.cpp) with one fp32 absmax per block of 256
// elements, 2 + 8/256 = 2.03 bytes per parameter instead of 8. Parameters
// under min_8bit elements keep fp32 moments (biases, gains: few bytes, and
// their blocks would be mostly one value). cpu: kernels/cpu/optim8bit.cpp per
// tensor; emu/cuda: one launch of kernels/cuda/adamw8bit.cu for every
// quantized parameter and one of the fused fp32 AdamW for the others.
// Capturable as AdamW is.
class AdamW8bit : public Optimizer {
 public:
  static constexpr int64_t kMin8bit = 4096;
  AdamW8bit(std::vector<ParamGroup> groups, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
            int64_t min_8bit = kMin8bit);
  void step() override;
  void step(const Tensor& grad_scale) override;
  void prepare_replay() override;
  const char* name() const override { return "adamw8bit"; }
  std::string state_note() const override;
  // For ZeRO: whether each parameter (flat over the groups) is quantized,
  // decided by the full tensor a shard's piece belongs to. Before the first step.
  void set_quantized(std::vector<bool> quantized);
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;

 private:
  struct Moments {
    Tensor m, v;                // codes (u8, n) when quantized, else fp32 in the parameter's shape
    Tensor m_absmax, v_absmax;  // f32 (blocks) when quantized
  };
  void init_state();
  void step_impl(const Tensor* grad_scale);
  double beta1_, beta2_, eps_;
  std::vector<bool> quantized_;
  std::vector<Moments> s_;
  std::vector<int64_t> step_;
  Tensor maps_;  // the two dynamic maps (512 floats) on the parameters' GPU device
  // The captured step: per kind (8-bit, fp32) its descriptors and their (parameter, group).
  struct Replay {
    std::shared_ptr<std::vector<uint8_t>> desc;
    std::vector<std::pair<size_t, size_t>> params;
    Tensor d_desc;
  };
  Replay replay_q_, replay_f_;
};

// Adafactor (Shazeer and Stern 2018) as transformers' Adafactor: factored
// second moments for tensors of 2 or more dims (a row and a column average
// per matrix: rows + cols floats instead of rows x cols), full ones for
// vectors, update clipping, optional first moment. lr: the external
// learning rate (relative_step off), or transformers' relative step
// min(1e-2, 1/sqrt(t)) (min(1e-6 t, 1/sqrt(t)) with warmup_init), times
// max(eps2, RMS(p)) with scale_parameter. Weight decay is decoupled:
// p -= wd lr p. cpu: kernels/cpu/adafactor.cpp; emu/cuda: the seven launches of
// kernels/cuda/adafactor.cu for all parameters. Capturable.
struct AdafactorOptions {
  double eps1 = 1e-30, eps2 = 1e-3, clip = 1.0, decay_rate = -0.8;
  double beta1 = 0.0;  // 0: no first moment
  bool relative_step = false, scale_parameter = false, warmup_init = false;
};

class Adafactor : public Optimizer {
 public:
  Adafactor(std::vector<ParamGroup> groups, double lr, AdafactorOptions o = {});
  void step() override;
  void step(const Tensor& grad_scale) override;
  void prepare_replay() override;
  const char* name() const override { return "adafactor"; }
  std::string state_note() const override;
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& state) override;
  static bool factored(const Tensor& p) { return p.ndim() >= 2; }

 private:
  struct Moments {
    Tensor row, col, v, m;  // row/col when factored, else v; m with beta1
  };
  void init_state();
  void step_impl(const Tensor* grad_scale);
  float rel_lr(const ParamGroup& g, int64_t t) const;
  AdafactorOptions o_;
  std::vector<Moments> s_;
  std::vector<int64_t> step_;
  // GPU scratch: per parameter batch + 2 floats; gpu::adafactor_scratch (2 per
  // element chunk, then the column partials)
  Tensor stats_, partials_;
  std::shared_ptr<std::vector<uint8_t>> replay_desc_;
  std::vector<std::pair<size_t, size_t>> replay_params_;
  Tensor replay_d_desc_;
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
