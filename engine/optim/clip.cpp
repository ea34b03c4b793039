// Global-norm gradient clipping. On the cpu the norm is summed in double over
// all parameters; the gradients on emu/cuda are summed by the multi-tensor
// kernel (kernels/cuda/adamw.cu: fp32 partials per block, reduced in a fixed
// order by a second pass, so the same every run) and only the scalar comes
// back to the host. Then every gradient is scaled by one factor (scale_).
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "engine/graph.h"
#include "engine/ops.h"
#include "engine/ops/op_common.h"
#include "engine/optim/optimizer.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adamw.h"

namespace eng {

// Sum of squares of the gradients on one GPU device, in one kernel pair,
// left on the device: element 0 of the returned scratch tensor. The
// descriptor upload is stream-ordered, so this can be captured in a graph.
static Tensor gpu_sum_squares(const std::vector<Tensor>& grads, Device dev) {
  std::vector<gpu::SumSquaresTensor> descs;
  int64_t chunks = 0;
  for (const Tensor& g : grads) {
    if (g.numel() == 0) continue;
    descs.push_back({g.data_ptr(), g.numel(), chunks, detail::storage_of(g.dtype())});
    chunks += gpu::chunks_of(g.numel());
  }
  static_assert(sizeof(gpu::SumSquaresTensor) % 4 == 0);
  const size_t bytes = descs.size() * sizeof(gpu::SumSquaresTensor);
  auto host = std::make_shared<std::vector<uint8_t>>(bytes);
  if (bytes) std::memcpy(host->data(), descs.data(), bytes);
  Tensor d_desc = Tensor::empty({int64_t(bytes / 4)}, DType::i32, dev);
  upload(dev, host, d_desc.data_ptr());
  Tensor scratch = Tensor::empty({gpu::kSumSquaresScratch}, DType::f32, dev);
  ENGINE_GPU_CALL(dev, sum_squares_multi_tensor, static_cast<const gpu::SumSquaresTensor*>(d_desc.data_ptr()),
                  int(descs.size()), chunks, scratch.data<float>(), nullptr);
  return scratch;
}

// The gradients of params that have one, all on one GPU device.
static std::vector<Tensor> gpu_grads_of(const std::vector<Tensor>& params, const char* what) {
  std::vector<Tensor> gs;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const DType t = g.dtype();
    ENGINE_CHECK(detail::on_gpu(g) && (t == DType::f32 || t == DType::bf16 || t == DType::f16), what,
                 ": needs f32/bf16/f16 gradients on a GPU device, got ", g.desc());
    ENGINE_CHECK(gs.empty() || gs[0].device() == g.device(), what, ": gradients on two GPU devices: ", gs[0].desc(),
                 " and ", g.desc());
    gs.push_back(g);
  }
  return gs;
}

Tensor grad_sum_squares(const std::vector<Tensor>& params, Device dev) {
  const std::vector<Tensor> gs = gpu_grads_of(params, "grad_sum_squares");
  ENGINE_CHECK(gs.empty() || gs[0].device() == dev, "grad_sum_squares: gradients on ", gs[0].device().str(),
               ", asked for ", dev.str());
  if (gs.empty()) return Tensor::zeros({1}, DType::f32, dev);
  return gpu_sum_squares(gs, dev).slice(0, 1);
}

Tensor clip_coefficient_from(const Tensor& sum_squares, double max_norm) {
  const Device dev = sum_squares.device();
  ENGINE_CHECK(detail::on_gpu(sum_squares) && sum_squares.dtype() == DType::f32 && sum_squares.numel() == 1,
               "clip_coefficient_from: needs a device f32 scalar, got ", sum_squares.desc());
  Tensor out = Tensor::empty({2}, DType::f32, dev);
  ENGINE_GPU_CALL(dev, clip_coefficient, sum_squares.data<float>(), max_norm, out.data<float>(), nullptr);
  return out;
}

Tensor clip_coefficient(const std::vector<Tensor>& params, double max_norm) {
  const std::vector<Tensor> gs = gpu_grads_of(params, "clip_coefficient");
  ENGINE_CHECK(!gs.empty(), "clip_coefficient: no parameter has a gradient");
  return clip_coefficient_from(gpu_sum_squares(gs, gs[0].device()).slice(0, 1), max_norm);
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
  if (!gpu_grads.empty()) {
    float gss = 0.f;
    copy_bytes(&gss, kCPU, gpu_sum_squares(gpu_grads, gpu_grads[0].device()).data_ptr(), gpu_grads[0].device(),
               sizeof(float));
    ss += double(gss);
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
