// Layer construction (initialisation) and forward passes.
#include "engine/nn/layers.h"

#include <cmath>

#include "engine/ops.h"

namespace eng {

// Seeds for the weights and biases of one layer must differ, or a square
// layer's bias would repeat the first row of its weight.
static uint64_t sub_seed(uint64_t seed, uint64_t k) { return seed * 1000003ull + k; }

Linear::Linear(int64_t in, int64_t out, Bias b, const InitOptions& init) {
  // torch.nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  const float bound = 1.0f / std::sqrt(float(in));
  Tensor w = init.std > 0 ? Tensor::randn({out, in}, sub_seed(init.seed, 0), init.std, init.dtype, init.device)
                          : Tensor::uniform({out, in}, sub_seed(init.seed, 0), -bound, bound, init.dtype, init.device);
  weight = register_parameter("weight", w);
  if (b == Bias::yes) {
    Tensor bt = init.std > 0 ? Tensor::zeros({out}, init.dtype, init.device)
                             : Tensor::uniform({out}, sub_seed(init.seed, 1), -bound, bound, init.dtype, init.device);
    bias = register_parameter("bias", bt);
  }
}

Tensor Linear::forward(const Tensor& x, const Autocast& ac) const {
  return ac.cast(linear(ac.cast(x), ac.cast(weight), ac.cast(bias)));
}

Tensor Linear::forward_gelu(const Tensor& x) const {
  return bias.defined() ? linear_gelu(x, weight, bias) : gelu(forward(x));
}

Tensor Linear::forward_gelu(const Tensor& x, const Autocast& ac) const {
  // On the cpu, autocast emulates 16-bit storage by rounding each op's f32
  // output; the fused op has no point between its GEMM and its GELU to round
  // the pre-activation at, so the cpu keeps the two ops there. On emu/cuda
  // the fused op stores the pre-activation in the compute dtype itself.
  if (!bias.defined() || (ac.active() && x.device().type == DeviceType::cpu)) return ac.cast(gelu(forward(x, ac)));
  return ac.cast(linear_gelu(ac.cast(x), ac.cast(weight), ac.cast(bias)));
}

Tensor Linear::forward_residual(const Tensor& x, const Tensor& residual, const Autocast& ac) const {
  // The cpu's autocast rounds each op's output (see forward_gelu): it keeps
  // the two ops there. On emu/cuda the fused GEMM stores in the compute dtype.
  if (x.ndim() < 2 || (ac.active() && x.device().type == DeviceType::cpu))
    return ac.cast(add(residual, forward(x, ac)));
  return linear_residual(ac.cast(x), ac.cast(weight), bias.defined() ? ac.cast(bias) : Tensor(), ac.cast(residual));
}

LayerNorm::LayerNorm(int64_t C, const InitOptions& init, double eps_) : eps(eps_) {
  weight = register_parameter("weight", Tensor::full({C}, 1.0, init.dtype, init.device));
  bias = register_parameter("bias", Tensor::zeros({C}, init.dtype, init.device));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layernorm(x, weight, bias, eps); }

Tensor LayerNorm::forward(const Tensor& x, const Autocast& ac) const {
  return ac.cast(layernorm(ac.cast(x), ac.cast(weight), ac.cast(bias), eps));
}

RMSNorm::RMSNorm(int64_t C, const InitOptions& init, double eps_) : eps(eps_) {
  weight = register_parameter("weight", Tensor::full({C}, 1.0, init.dtype, init.device));
}

Tensor RMSNorm::forward(const Tensor& x, const Autocast& ac) const {
  return ac.cast(rmsnorm(ac.cast(x), ac.cast(weight), eps));
}

Embedding::Embedding(int64_t V, int64_t C, const InitOptions& init) {
  const float std = init.std > 0 ? init.std : 1.0f;  // torch.nn.Embedding: N(0, 1)
  weight = register_parameter("weight", Tensor::randn({V, C}, sub_seed(init.seed, 0), std, init.dtype, init.device));
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

MLP::MLP(int64_t in, int64_t hidden, int64_t out, Activation a, const InitOptions& init) : act(a) {
  InitOptions i1 = init, i2 = init;
  i1.seed = sub_seed(init.seed, 10);
  i2.seed = sub_seed(init.seed, 11);
  fc1 = register_module("fc1", std::make_shared<Linear>(in, hidden, Bias::yes, i1));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, out, Bias::yes, i2));
}

Tensor MLP::forward(const Tensor& x) const {
  const Tensor h = act == Activation::gelu ? fc1->forward_gelu(x) : relu(fc1->forward(x));
  return fc2->forward(h);
}

Tensor MLP::forward(const Tensor& x, const Autocast& ac) const {
  const Tensor h = act == Activation::gelu ? fc1->forward_gelu(x, ac) : ac.cast(relu(fc1->forward(x, ac)));
  return fc2->forward(h, ac);
}

}  // namespace eng
