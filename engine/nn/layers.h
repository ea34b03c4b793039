// The basic layers: Linear, LayerNorm, RMSNorm, Embedding, MLP. Initialisation follows
// PyTorch's defaults unless a std is given (GPT-2 passes 0.02); every random
// init takes an explicit seed so two runs build the same model.
// forward(x, autocast) applies a precision level (engine/precision.h): the
// weights and the GEMM inputs/outputs in the compute dtype; with the default
// (O0) Autocast it is forward(x).
#pragma once
#include <cstdint>
#include <memory>

#include "engine/nn/module.h"
#include "engine/ops.h"
#include "engine/precision.h"

namespace eng {

enum class Bias : uint8_t { no, yes };
enum class Activation : uint8_t { relu, gelu };

struct InitOptions {
  uint64_t seed = 0;
  DType dtype = DType::f32;
  Device device = kCPU;
  float std = 0.f;  // > 0: weights N(0, std); 0: PyTorch's default for the layer
};

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, Bias bias, const InitOptions& init);
  Tensor forward(const Tensor& x) const { return linear(x, weight, bias); }
  Tensor forward(const Tensor& x, const Autocast& ac) const;
  // gelu(forward(x)) as one op (linear_gelu: GELU in the GEMM's epilogue on
  // emu/cuda); the casts of forward(x, ac) then gelu, in the same places.
  Tensor forward_gelu(const Tensor& x) const;
  Tensor forward_gelu(const Tensor& x, const Autocast& ac) const;
  // cast(residual + forward(x, ac)), a residual block's output projection: one
  // op (linear_residual: the GEMM adds the residual and the bias if any, on
  // emu/cuda in its epilogue), but on the cpu under autocast (which rounds
  // each op's output: the two ops and their casts).
  Tensor forward_residual(const Tensor& x, const Tensor& residual, const Autocast& ac) const;
  Tensor weight;  // (out, in), as torch.nn.Linear
  Tensor bias;    // (out) or undefined
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t C, const InitOptions& init, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;
  Tensor forward(const Tensor& x, const Autocast& ac) const;  // statistics in fp32 inside the kernel
  Tensor weight, bias;
  double eps;
};

// Llama's norm: x rsqrt(mean(x^2) + eps) w, w initialised to ones.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t C, const InitOptions& init, double eps = 1e-5);
  Tensor forward(const Tensor& x) const { return rmsnorm(x, weight, eps); }
  Tensor forward(const Tensor& x, const Autocast& ac) const;  // statistics in fp32 inside the kernel
  Tensor weight;
  double eps;
};

class Embedding : public Module {
 public:
  Embedding(int64_t V, int64_t C, const InitOptions& init);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;  // (V, C)
};

// fc2(act(fc1(x))), the two-layer perceptron used as the transformer's MLP.
class MLP : public Module {
 public:
  MLP(int64_t in, int64_t hidden, int64_t out, Activation act, const InitOptions& init);
  Tensor forward(const Tensor& x) const;
  Tensor forward(const Tensor& x, const Autocast& ac) const;  // logits in the compute dtype
  std::shared_ptr<Linear> fc1, fc2;
  Activation act;
};

}  // namespace eng
