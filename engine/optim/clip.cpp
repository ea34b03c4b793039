// Global-norm gradient clipping. On the cpu the norm is summed in double over
// all parameters; the gradients on emu/cuda are summed by the multi-tensor
// kernel (kernels/cuda/adamw.cu: fp32 partials per block, reduced in a fixed
// order by a second pass, so the same every run) and only the scalar comes
// back to the host. Then every gradient is scaled by one factor (scale_).
#include <cmath>

#include "engine/error.h"
#include "engine/ops.h"
#include "engine/ops/op_common.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adamw.h"

namespace eng {

// Sum of squares of the gradients on one GPU device, in one kernel pair.
static double gpu_sum_squares(const std::vector<Tensor>& grads, Device dev) {
  std::vector<gpu::SumSquaresTensor> descs;
  int64_t chunks = 0;
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    descs.push_back({g.data_ptr(), g.numel(), chunks, detail::storage_of(g.dtype())});
    chunks += gpu::chunks_of(g.numel());
  }
  static_assert(sizeof(gpu::SumSquaresTensor) % 4 == 0);
  const size_t bytes = descs.size() * sizeof(gpu::SumSquaresTensor);
  Tensor d_desc = Tensor::empty({int64_t(bytes / 4)}, DType::i32, dev);
  if (bytes) copy_bytes(d_desc.data_ptr(), dev, descs.data(), kCPU, bytes);
  Tensor scratch = Tensor::empty({gpu::kSumSquaresScratch}, DType::f32, dev);
  ENGINE_GPU_CALL(dev, sum_squares_multi_tensor, static_cast<const gpu::SumSquaresTensor*>(d_desc.data_ptr()),
                  int(descs.size()), chunks, scratch.data<float>(), nullptr);
  float ss = 0.f;
  copy_bytes(&ss, kCPU, scratch.data_ptr(), dev, sizeof(float));
  return double(ss);
}

double grad_norm(const std::vector<Tensor>& params) {
  double ss = 0;
  std::vector<Tensor> gpu_grads;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (detail::on_gpu(g)) {
      const DType t = g.dtype();
      ENGINE_CHECK(t == DType::f32 || t == DType::bf16 || t == DType::f16, "grad_norm: dtype ", dtype_name(t),
                   " not supported on ", g.device().str(), ": ", g.desc());
      ENGINE_CHECK(gpu_grads.empty() || gpu_grads[0].device() == g.device(),
                   "grad_norm: gradients on two GPU devices: ", gpu_grads[0].desc(), " and ", g.desc());
      gpu_grads.push_back(g);
      continue;
    }
    ss += g.dtype() == DType::f64 ? cpu::sum_squares(g.data<double>(), g.numel())
                                  : cpu::sum_squares(g.data<float>(), g.numel());
  }
  if (!gpu_grads.empty()) ss += gpu_sum_squares(gpu_grads, gpu_grads[0].device());
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
