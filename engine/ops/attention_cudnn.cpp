// attention(..., AttentionImpl::cudnn): cuDNN's fused attention
// (kernels/cudnn/cudnn.h) as an engine op, CUDA builds only. The forward
// saves q, k, v, out and cuDNN's fp32 stats (B, NH, T); the backward hands
// them back to cuDNN. Workspaces come from the device's caching allocator
// (so inside a CUDA graph capture, from the graph's pool); the plans are
// built by the first (eager) step and only executed after, which is what a
// capture may contain.
#include "engine/gpu_context.h"
#include "engine/ops/op_common.h"
#include "kernels/cuda/attention.h"
#include "kernels/cudnn/cudnn.h"

namespace eng {
using namespace detail;

namespace detail {

Tensor attention_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal) {
  SdpaShape s;
  s.B = q.size(0), s.T = q.size(1), s.NH = q.size(2), s.HS = q.size(3);
  s.st = storage_of(q.dtype());
  s.mask = causal == Causal::yes ? gpu::AttentionMask::causal : gpu::AttentionMask::none;
  ENGINE_CHECK(q.dtype() == DType::bf16 || q.dtype() == DType::f16, "attention (cudnn): ", q.desc(),
               ": cuDNN's fused attention takes bf16 or f16 only (precision O2 or O3)");
  const std::string why = cudnn_sdpa_unsupported(s);
  ENGINE_CHECK(why.empty(), "attention (cudnn): ", q.desc(), ": ", why);
  CudnnContext& ctx = gpu_context(q.device().index).cudnn();  // throws if cuDNN cannot run here
  Tensor out = empty_like(q);
  Tensor stats = Tensor::empty({s.B, s.NH, s.T}, DType::f32, q.device());
  // A step profile counts cuDNN's FLOPs and bytes as our kernels' (the same math, the same tensors).
  const gpu::AttentionDims d{s.B, s.T, s.T, s.NH, s.HS, 0};
  {
    const Tensor ws = Tensor::scratch(cudnn_sdpa_workspace(ctx, s, SdpaPass::forward), q.device());
    const kprof::Scope profiled("cudnn_sdpa_forward", kcost::attention_forward(s.st, nullptr, nullptr, nullptr, nullptr,
                                                                               nullptr, d, s.mask, nullptr));
    cudnn_sdpa_forward(ctx, s, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), stats.data<float>(),
                       ws.data_ptr(), gpu::current_stream());
  }
  if (!needs_record({q, k, v})) return out;
  Tensor sq = q.detach(), sk = k.detach(), sv = v.detach(), so = out.detach();
  record("attention_cudnn", out, {q, k, v}, [sq, sk, sv, so, stats, s, d](const Tensor& g, const std::vector<bool>&) {
    ENGINE_CHECK(g.dtype() == sq.dtype() && g.shape() == sq.shape(), "attention (cudnn) backward: gradient ", g.desc(),
                 " does not match ", sq.desc());
    CudnnContext& c = gpu_context(g.device().index).cudnn();
    Tensor dq = empty_like(sq), dk = empty_like(sk), dv = empty_like(sv);
    const Tensor ws = Tensor::scratch(cudnn_sdpa_workspace(c, s, SdpaPass::backward), g.device());
    const kprof::Scope profiled("cudnn_sdpa_backward",
                                kcost::attention_backward(s.st, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                          nullptr, nullptr, nullptr, nullptr, d, s.mask, nullptr));
    cudnn_sdpa_backward(c, s, sq.data_ptr(), sk.data_ptr(), sv.data_ptr(), so.data_ptr(), g.data_ptr(),
                        stats.data<float>(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), ws.data_ptr(),
                        gpu::current_stream());
    return std::vector<Tensor>{dq, dk, dv};
  });
  return out;
}

}  // namespace detail
}  // namespace eng
