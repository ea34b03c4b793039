// Global-norm gradient clipping. The norm is summed in double over all
// parameters, then every gradient is scaled by one factor.
#include <cmath>

#include "engine/error.h"
#include "engine/ops.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {

double grad_norm(const std::vector<Tensor>& params) {
  double ss = 0;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    ENGINE_CHECK(g.device().type == DeviceType::cpu, "grad_norm: no kernel for ", g.desc(), " yet");
    ss += g.dtype() == DType::f64 ? cpu::sum_squares(g.data<double>(), g.numel())
                                  : cpu::sum_squares(g.data<float>(), g.numel());
  }
  return std::sqrt(ss);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  const double norm = grad_norm(params);
  if (max_norm <= 0) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (g.defined()) scale_(g, coef);
    }
  return norm;
}

}  // namespace eng
