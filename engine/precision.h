// Precision levels (Mammoth/apex style -O levels) and the autocast that applies
// them to a forward pass. docs/precision.md explains each level.
//   O0       fp32 everywhere.
//   O1       fp32 storage, TF32 GEMMs on the cuda device (a flag the cuBLASLt
//            path honours; on cpu and emu it changes nothing).
//   O2       bf16 autocast: fp32 master weights and AdamW state; GEMM inputs
//            and activations in bf16; layernorm/softmax/loss statistics in fp32.
//   O2-fp16  O2 with fp16 instead of bf16, plus dynamic loss scaling
//            (engine/optim/loss_scaler.h).
//   O3       O2 plus the training step captured as a CUDA graph on the cuda
//            device (and on emu, whose emulator records and replays it:
//            models/train/train_step.h); on cpu it runs as O2 and says so.
// Conventions: parameters are always the fp32 master weights. Autocast casts
// them to the compute dtype inside the forward; the cast is recorded by
// autograd, so the backward casts the gradient back to fp32 and it accumulates
// into the master's .grad. On the cpu device, whose kernels are f32/f64 only,
// a cast to bf16/f16 is emulated by rounding to that format and back to f32
// (x.to(bf16).to(f32)): the values are exactly those a GPU would store, the
// arithmetic stays fp32 as in the GPU kernels.
#pragma once
#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace eng {

enum class Precision : uint8_t { O0, O1, O2, O2_fp16, O3 };

Precision parse_precision(const std::string& s);  // "O0", "O1", "O2", "O2-fp16", "O3"; throws on others
const char* precision_name(Precision p);          // the parse_precision spelling
inline constexpr const char* kPrecisionLevels = "O0 | O1 | O2 | O2-fp16 | O3";

enum class LossScaling : uint8_t { off, dynamic };

struct PrecisionPolicy {
  Precision level = Precision::O0;
  DType compute = DType::f32;                   // GEMM inputs and activations between layers
  bool tf32_gemm = false;                       // O1: cuda GEMMs in TF32 (no-op on cpu/emu)
  DType master = DType::f32;                    // the parameters the optimizer updates, always fp32
  DType optimizer_state = DType::f32;           // AdamW moments, always fp32
  DType statistics = DType::f32;                // layernorm/softmax/loss: our kernels compute these in fp32
  LossScaling loss_scaling = LossScaling::off;  // dynamic for O2-fp16
  bool cuda_graph = false;                      // O3: capture the step on cuda/emu
};

PrecisionPolicy precision_policy(Precision p);

// Sets what the level changes process-wide on `dev`: on a cuda device, the
// compute mode of GEMMs on f32 storage (TF32 for O1, fp32 otherwise: the
// GpuContext's f32_gemm_mode, read by every cuBLASLt matmul there, like
// torch.backends.cuda.matmul.allow_tf32). Nothing on cpu and emu.
void apply_precision(Precision p, Device dev);

// One line on what the level means on `dev`, including what is emulated or a
// no-op there ("O3: no CUDA graphs on cpu, runs as O2 ..."). Printed by train.
std::string precision_summary(Precision p, Device dev);

// Applies a policy to a forward pass. Models call cast() at the points where
// a GPU run stores activations in the compute dtype (GEMM inputs and outputs,
// block boundaries) and on weights before using them; f32() before a loss.
class ComputeCopies;

class Autocast {
 public:
  Autocast() = default;  // O0 on the cpu: every call is the identity
  // copies (nullable, bf16 compute on emu/cuda): a master weight's cast reads
  // its kept copy (engine/compute_copies.h) instead of casting it again.
  explicit Autocast(Precision p, ComputeCopies* copies = nullptr);
  const PrecisionPolicy& policy() const { return policy_; }
  bool active() const { return policy_.compute != DType::f32; }

  // A floating f32 tensor in the compute dtype (recorded; gradients flow back
  // to it in f32). On the cpu: rounded to the compute dtype and back to f32.
  // Identity for O0/O1 and for non-f32 tensors (on emu/cuda: tensors already
  // cast). On the cpu a second rounding of a rounded value changes nothing.
  Tensor cast(const Tensor& x) const;
  // cast(x) with zero rows appended up to `rows` (>= x's; a table padded for
  // aligned GEMMs, pad_rows); the gradient reaches x's own rows. On emu/cuda
  // with an active policy only (the cpu and fp32 do not pad).
  Tensor cast_rows(const Tensor& x, int64_t rows) const;
  // Back to f32 for statistics (the loss); identity when already f32.
  Tensor f32(const Tensor& x) const;

 private:
  PrecisionPolicy policy_;
  ComputeCopies* copies_ = nullptr;
};

}  // namespace eng
