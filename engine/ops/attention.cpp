// Attention on (B, T, NH, HS), causal or not: self-attention, or (context
// parallel) this rank's Tq queries at q_offset against all Tk keys. The cpu
// path is the three-step reference (kernels/cpu/attention.cpp) and saves the
// (B, NH, Tq, Tk) probabilities for backward. On emu/cuda the fused
// FlashAttention-2 kernels save only q, k, v, out and the fp32 logsumexp
// (B, NH, T), and backward recomputes the probabilities tile by tile: the
// tensor-core ones (kernels/cuda/attention_mma.cu) where they take the call,
// the CUDA-core ones (kernels/cuda/attention.cu) otherwise. Both compute the
// same logsumexp, so a backward may run the other family than its forward
// (a gradient whose rows are not 16-byte aligned). kernels/ cannot see the engine's Causal, so it
// is mapped onto each layer's own AttentionMask here; backward uses the
// forward's mask. AttentionImpl::cudnn is cuDNN's fused attention on the
// cuda device (attention_cudnn.cpp). attention_qkv takes q, k, v packed in
// one (B, T, 3C) tensor, read in place (its gradient written in place) by
// our kernels on every device and by cuDNN's (strides). Grouped-query
// attention (k, v with NKV < NH heads; a packed (B, T, (NH + 2 NKV) HS)
// qkv) runs our kernels, which read each K/V head for its group in place,
// and cuDNN's, whose sdpa takes k and v with fewer heads (in place too).
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_mma.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

namespace {

// Whether the tensor-core kernels take a call (attention_mma.h's contract:
// bf16/f16, head size 64 or 128, every row of q, k, v, dout on 16 bytes,
// their grid limits). AttentionImpl::ours in 16-bit storage that they refuse
// runs the CUDA-core kernels, and says why once a process (f32, O0/O1's
// storage, is their domain and is not noted).
bool tensor_cores(AttentionImpl impl, gpu::Storage st, const gpu::AttentionDims& d,
                  std::initializer_list<const void*> ptrs) {
  if (impl != AttentionImpl::ours || st == gpu::Storage::f32) return false;
  const int64_t ld = d.ld_qkv ? d.ld_qkv : d.NH * d.HS;
  bool rows16 = ld % 8 == 0;
  for (const void* p : ptrs) rows16 = rows16 && gpu::aligned_to(p, 16);
  // The launchers' grid limits: 64-row tiles of the longer side, int key positions.
  const bool grid = d.B * d.NH * ((std::max(d.Tq, d.Tk) + 63) / 64) < (int64_t(1) << 31) && d.Tk < (int64_t(1) << 30);
  const std::string why = d.HS != 64 && d.HS != 128 ? cat("head size ", d.HS, " (they take 64 or 128)")
                          : !rows16                 ? std::string("rows not on 16 bytes")
                          : !grid                   ? cat(d.B * d.NH, " heads of ", d.Tk, " keys (too large a grid)")
                                                    : std::string();
  if (why.empty()) return true;
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr, "note: attention: %s: our CUDA-core kernels run it, not the tensor-core ones (said once)\n",
                 why.c_str());
  return false;
}

// The emu/cuda path of attention and attention_qkv, q, k, v lying in ins as
// for the cpu path below (three tensors, or one packed qkv whose rows
// d.ld_qkv apart the kernels read in place): the fused FlashAttention-2
// kernels, saving q, k, v, out and the logsumexp; the backward writes each
// input's gradient laid out as the input (one packed dqkv: no split copies,
// no zeroed gradients summed).
Tensor attention_gpu(const char* name, const std::vector<Tensor>& ins, const std::array<int64_t, 3>& off,
                     const Shape& out_shape, const gpu::AttentionDims& d, Causal causal, AttentionImpl impl) {
  const gpu::AttentionMask mask = causal == Causal::yes ? gpu::AttentionMask::causal : gpu::AttentionMask::none;
  const Device dev = ins[0].device();
  const gpu::Storage st = storage_of(ins[0].dtype());
  Tensor out = Tensor::empty(out_shape, ins[0].dtype(), dev);
  Tensor lse = Tensor::empty({d.B, d.NH, d.Tq}, DType::f32, dev);
  const void *q = qkv_part(ins, off, 0), *k = qkv_part(ins, off, 1), *v = qkv_part(ins, off, 2);
  if (tensor_cores(impl, st, d, {q, k, v}))
    ENGINE_GPU_CALL(dev, attention_forward_mma, st, q, k, v, out.data_ptr(), lse.data<float>(), d, mask, nullptr);
  else
    ENGINE_GPU_CALL(dev, attention_forward, st, q, k, v, out.data_ptr(), lse.data<float>(), d, mask, nullptr);
  if (!needs_record(ins)) return out;
  std::vector<Tensor> saved;
  for (const Tensor& x : ins) saved.push_back(x.detach());
  Tensor so = out.detach();
  record(name, out, ins, [name, saved, off, so, lse, d, mask, st, impl](const Tensor& g, const std::vector<bool>&) {
    ENGINE_CHECK(g.dtype() == so.dtype() && g.shape() == so.shape(), name, " backward: gradient ", g.desc(),
                 " does not match ", so.desc());
    std::vector<Tensor> grads;  // every element written
    for (const Tensor& x : saved) grads.push_back(empty_like(x));
    Tensor delta = Tensor::empty({d.B, d.NH, d.Tq}, DType::f32, g.device());
    const void *sq = qkv_part(saved, off, 0), *sk = qkv_part(saved, off, 1), *sv = qkv_part(saved, off, 2);
    void *dq = qkv_part(grads, off, 0), *dk = qkv_part(grads, off, 1), *dv = qkv_part(grads, off, 2);
    if (tensor_cores(impl, st, d, {sq, sk, sv, g.data_ptr()}))
      ENGINE_GPU_CALL(g.device(), attention_backward_mma, st, g.data_ptr(), sq, sk, sv, so.data_ptr(),
                      lse.data<float>(), delta.data<float>(), dq, dk, dv, d, mask, nullptr);
    else
      ENGINE_GPU_CALL(g.device(), attention_backward, st, g.data_ptr(), sq, sk, sv, so.data_ptr(), lse.data<float>(),
                      delta.data<float>(), dq, dk, dv, d, mask, nullptr);
    return grads;
  });
  return out;
}

// q, k or v (i = 0, 1, 2) of the cpu path, typed (qkv_part, op_common.h).
template <typename F>
F* part(const std::vector<Tensor>& ins, const std::array<int64_t, 3>& off, size_t i) {
  return static_cast<F*>(qkv_part(ins, off, i));
}

// The cpu path of attention and attention_qkv (d.ld_qkv says how q, k, v lie
// in ins): the three-step reference, saving the probabilities for backward,
// which gives each input its gradient laid out as the input.
Tensor attention_cpu(const char* name, const std::vector<Tensor>& ins, const std::array<int64_t, 3>& off,
                     const Shape& out_shape, const cpu::AttentionDims& d, Causal causal) {
  const cpu::AttentionMask mask = causal == Causal::yes ? cpu::AttentionMask::causal : cpu::AttentionMask::none;
  const DType t = ins[0].dtype();
  Tensor out = Tensor::empty(out_shape, t, ins[0].device());
  Tensor att = Tensor::empty({d.B, d.NH, d.Tq, d.Tk}, t, ins[0].device());
  dispatch_float(t, [&]<typename F>() {
    cpu::attention_forward(part<F>(ins, off, 0), part<F>(ins, off, 1), part<F>(ins, off, 2), out.data<F>(),
                           att.data<F>(), d, mask);
  });
  if (!needs_record(ins)) return out;
  std::vector<Tensor> saved;
  for (const Tensor& x : ins) saved.push_back(x.detach());
  record(name, out, ins, [saved, off, att, d, mask](const Tensor& g, const std::vector<bool>&) {
    std::vector<Tensor> grads;  // every element written
    for (const Tensor& x : saved) grads.push_back(empty_like(x));
    dispatch_float(g.dtype(), [&]<typename F>() {
      cpu::attention_backward(g.data<F>(), part<F>(saved, off, 0), part<F>(saved, off, 1), part<F>(saved, off, 2),
                              att.data<F>(), part<F>(grads, off, 0), part<F>(grads, off, 1), part<F>(grads, off, 2), d,
                              mask);
    });
    return grads;
  });
  return out;
}

}  // namespace

const char* attention_impl_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::ours:
      return "ours";
    case AttentionImpl::ours_cuda_cores:
      return "ours_cuda_cores";
    case AttentionImpl::cudnn:
      return "cudnn";
  }
  return "?";
}

AttentionImpl parse_attention_impl(const std::string& name) {
  for (AttentionImpl i : {AttentionImpl::ours, AttentionImpl::ours_cuda_cores, AttentionImpl::cudnn})
    if (name == attention_impl_name(i)) return i;
  ENGINE_USER_FAIL("attention '", name, "': ours, ours_cuda_cores or cudnn");
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal, AttentionImpl impl,
                 int64_t q_offset) {
  check_float_inputs("attention", {q, k, v}, GpuKernel::yes);
  ENGINE_CHECK(q.ndim() == 4, "attention: q must be (B, T, NH, HS), got ", q.desc());
  ENGINE_CHECK(
      k.ndim() == 4 && k.size(0) == q.size(0) && k.size(2) > 0 && q.size(2) % k.size(2) == 0 &&
          k.size(3) == q.size(3) && v.shape() == k.shape(),
      "attention: q, k, v shapes differ (k and v (B, Tk, NKV, HS), NKV dividing q's heads): ", descs({q, k, v}));
  const int64_t NKV = k.size(2);
  ENGINE_CHECK(q_offset >= 0 && q_offset + q.size(1) <= k.size(1), "attention: ", q.size(1), " queries at offset ",
               q_offset, " do not lie within ", k.size(1), " keys: ", descs({q, k}));
  if (impl == AttentionImpl::cudnn) {
    ENGINE_CHECK(k.size(1) == q.size(1) && q_offset == 0,
                 "attention (cudnn): queries and keys must be the same sequence, got ", descs({q, k}), " at offset ",
                 q_offset, " (use --attention ours)");
    ENGINE_CHECK(q.device().type == DeviceType::cuda, "attention (cudnn): cuDNN runs on the cuda device only, got ",
                 q.device().str(), " (use --attention ours there)");
#if defined(ENGINE_HAVE_CUDA)
    return attention_cudnn(q, k, v, causal);
#else
    ENGINE_FAIL("attention (cudnn): this build has no CUDA");
#endif
  }
  const int64_t HS = q.size(3);
  if (on_gpu(q)) {
    ENGINE_CHECK(HS <= emuk::attention_max_head_size(), "attention: head size ", HS, " not supported on ",
                 q.device().str(), " (at most ", emuk::attention_max_head_size(), "): ", q.desc());
    return attention_gpu("attention", {q, k, v}, {0, 0, 0}, q.shape(),
                         gpu::AttentionDims{q.size(0), q.size(1), k.size(1), q.size(2), HS, q_offset, 0, NKV}, causal,
                         impl);
  }
  return attention_cpu("attention", {q, k, v}, {0, 0, 0}, q.shape(),
                       cpu::AttentionDims{q.size(0), q.size(1), k.size(1), q.size(2), HS, q_offset, 0, NKV}, causal);
}

Tensor attention_qkv(const Tensor& qkv, int64_t n_head, Causal causal, AttentionImpl impl, int64_t n_kv_head) {
  check_float_inputs("attention_qkv", {qkv}, GpuKernel::yes);
  const int64_t NKV = n_kv_head ? n_kv_head : n_head;
  ENGINE_CHECK(qkv.ndim() == 3 && n_head > 0 && NKV > 0 && n_head % NKV == 0 && qkv.size(2) % (n_head + 2 * NKV) == 0,
               "attention_qkv: qkv ", qkv.desc(), " is not (B, T, (", n_head, " + 2 x ", NKV,
               ") heads * head size), K/V heads dividing the query heads");
  const int64_t B = qkv.size(0), T = qkv.size(1), W = qkv.size(2), HS = W / (n_head + 2 * NKV);
  const int64_t C = n_head * HS, Ckv = NKV * HS;
  const Shape heads{B, T, n_head, HS};
  const bool ours = impl != AttentionImpl::cudnn;
  if (on_gpu(qkv) && ours) {
    ENGINE_CHECK(HS <= emuk::attention_max_head_size(), "attention: head size ", HS, " not supported on ",
                 qkv.device().str(), " (at most ", emuk::attention_max_head_size(), "): ", qkv.desc());
    return attention_gpu("attention_qkv", {qkv}, {0, C, C + Ckv}, heads,
                         gpu::AttentionDims{B, T, T, n_head, HS, 0, W, NKV}, causal, impl);
  }
#if defined(ENGINE_HAVE_CUDA)
  if (impl == AttentionImpl::cudnn && qkv.device().type == DeviceType::cuda) {
    return attention_qkv_cudnn(qkv, n_head, NKV, causal);
  }
#endif
  if (on_gpu(qkv) || !ours) {  // cuDNN off the cuda device: attention says why not
    const std::vector<Tensor> p = split(qkv, {C, Ckv, Ckv}, -1);
    const Shape kv_heads{B, T, NKV, HS};
    return attention(p[0].reshape(heads), p[1].reshape(kv_heads), p[2].reshape(kv_heads), causal, impl);
  }
  return attention_cpu("attention_qkv", {qkv}, {0, C, C + Ckv}, heads,
                       cpu::AttentionDims{B, T, T, n_head, HS, 0, W, NKV}, causal);
}

}  // namespace eng
