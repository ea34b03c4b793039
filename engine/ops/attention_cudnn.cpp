// attention(..., AttentionImpl::cudnn) and attention_qkv's cuDNN path:
// cuDNN's fused attention (kernels/cudnn/cudnn.h) as an engine op, CUDA
// builds only; a packed qkv is read in place and its gradient written in
// place (strides, no split); k and v may have fewer heads than q (grouped-query
// attention, cuDNN's sdpa reads them in place). The forward saves q, k, v, out and cuDNN's fp32
// stats (B, NH, T); the backward hands them back to cuDNN. Workspaces come from the device's caching allocator
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

namespace {
// The op for q, k, v given as ins (three tensors, (B, T, NH, HS), k and v
// (B, T, NKV, HS)) or as one packed (B, T, (NH + 2 NKV) HS) qkv whose pieces
// cuDNN reads and writes in place (s.packed).
Tensor sdpa(const std::vector<Tensor>& ins, SdpaShape s) {
  const Tensor& first = ins[0];
  ENGINE_CHECK(first.dtype() == DType::bf16 || first.dtype() == DType::f16, "attention (cudnn): ", first.desc(),
               ": cuDNN's fused attention takes bf16 or f16 only (precision O2 or O3)");
  s.st = storage_of(first.dtype());
  const std::string why = cudnn_sdpa_unsupported(s);
  ENGINE_CHECK(why.empty(), "attention (cudnn): ", first.desc(), ": ", why);
  CudnnContext& ctx = gpu_context(first.device().index).cudnn();  // throws if cuDNN cannot run here
  const int64_t C = s.NH * s.HS, Ckv = s.kv_heads() * s.HS;
  const std::array<int64_t, 3> off = s.packed ? std::array<int64_t, 3>{0, C, C + Ckv} : std::array<int64_t, 3>{0, 0, 0};
  Tensor out = Tensor::empty({s.B, s.T, s.NH, s.HS}, first.dtype(), first.device());
  Tensor stats = Tensor::empty({s.B, s.NH, s.T}, DType::f32, first.device());
  // A step profile counts cuDNN's FLOPs and bytes as our kernels' (the same math, the same tensors).
  const gpu::AttentionDims d{s.B, s.T, s.T, s.NH, s.HS, 0, s.packed ? C + 2 * Ckv : 0, s.kv_heads()};
  {
    const Tensor ws = Tensor::scratch(cudnn_sdpa_workspace(ctx, s, SdpaPass::forward), first.device());
    const kprof::Scope profiled("cudnn_sdpa_forward", kcost::attention_forward(s.st, nullptr, nullptr, nullptr, nullptr,
                                                                               nullptr, d, s.mask, nullptr));
    cudnn_sdpa_forward(ctx, s, qkv_part(ins, off, 0), qkv_part(ins, off, 1), qkv_part(ins, off, 2), out.data_ptr(),
                       stats.data<float>(), ws.data_ptr(), gpu::current_stream());
  }
  if (!needs_record(ins)) return out;
  std::vector<Tensor> saved;
  for (const Tensor& x : ins) saved.push_back(x.detach());
  Tensor so = out.detach();
  record(s.packed ? "attention_qkv_cudnn" : "attention_cudnn", out, ins,
         [saved, so, stats, s, d, off](const Tensor& g, const std::vector<bool>&) {
           ENGINE_CHECK(g.dtype() == so.dtype() && g.shape() == so.shape(), "attention (cudnn) backward: gradient ",
                        g.desc(), " does not match ", so.desc());
           CudnnContext& c = gpu_context(g.device().index).cudnn();
           std::vector<Tensor> grads;  // laid out as the inputs: every element written
           for (const Tensor& x : saved) grads.push_back(empty_like(x));
           const Tensor ws = Tensor::scratch(cudnn_sdpa_workspace(c, s, SdpaPass::backward), g.device());
           const kprof::Scope profiled(
               "cudnn_sdpa_backward",
               kcost::attention_backward(s.st, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, d, s.mask, nullptr));
           cudnn_sdpa_backward(c, s, qkv_part(saved, off, 0), qkv_part(saved, off, 1), qkv_part(saved, off, 2),
                               so.data_ptr(), g.data_ptr(), stats.data<float>(), qkv_part(grads, off, 0),
                               qkv_part(grads, off, 1), qkv_part(grads, off, 2), ws.data_ptr(), gpu::current_stream());
           return grads;
         });
  return out;
}

SdpaShape sdpa_shape(int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, Causal causal, bool packed) {
  SdpaShape s;
  s.B = B, s.T = T, s.NH = NH, s.NKV = NKV, s.HS = HS, s.packed = packed;
  s.mask = causal == Causal::yes ? gpu::AttentionMask::causal : gpu::AttentionMask::none;
  return s;
}
}  // namespace

Tensor attention_cudnn(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal) {
  return sdpa({q, k, v}, sdpa_shape(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), causal, false));
}

Tensor attention_qkv_cudnn(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, Causal causal) {
  const int64_t HS = qkv.size(2) / (n_head + 2 * n_kv_head);
  return sdpa({qkv}, sdpa_shape(qkv.size(0), qkv.size(1), n_head, n_kv_head, HS, causal, true));
}

}  // namespace detail
}  // namespace eng
