// Attention on (B, T, NH, HS), causal or not: self-attention, or (context
// parallel) this rank's Tq queries at q_offset against all Tk keys. The cpu
// path is the three-step reference (kernels/cpu/attention.cpp) and saves the
// (B, NH, Tq, Tk) probabilities for backward. On emu/cuda the fused
// FlashAttention-2 kernels (kernels/cuda/attention.cu) save only q, k, v, out
// and the fp32 logsumexp (B, NH, T), and backward recomputes the
// probabilities tile by tile. kernels/ cannot see the engine's Causal, so it
// is mapped onto each layer's own AttentionMask here; backward uses the
// forward's mask. AttentionImpl::cudnn is cuDNN's fused attention on the
// cuda device (attention_cudnn.cpp). attention_qkv takes q, k, v packed in
// one (B, T, 3C) tensor: on the cpu read in place, elsewhere split.
#include "kernels/cuda/attention.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

namespace {

Tensor attention_gpu(const Tensor& q, const Tensor& k, const Tensor& v, DType t, Causal causal, int64_t q_offset) {
  const gpu::AttentionDims d{q.size(0), q.size(1), k.size(1), q.size(2), q.size(3), q_offset};
  const gpu::AttentionMask mask = causal == Causal::yes ? gpu::AttentionMask::causal : gpu::AttentionMask::none;
  Tensor out = empty_like(q);
  Tensor lse = Tensor::empty({d.B, d.NH, d.Tq}, DType::f32, q.device());
  ENGINE_GPU_CALL(q.device(), attention_forward, storage_of(t), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                  out.data_ptr(), lse.data<float>(), d, mask, nullptr);
  if (!needs_record({q, k, v})) return out;
  Tensor sq = q.detach(), sk = k.detach(), sv = v.detach(), so = out.detach();
  record("attention", out, {q, k, v}, [sq, sk, sv, so, lse, d, mask](const Tensor& g, const std::vector<bool>&) {
    ENGINE_CHECK(g.dtype() == sq.dtype() && g.shape() == sq.shape(), "attention backward: gradient ", g.desc(),
                 " does not match ", sq.desc());
    Tensor dq = empty_like(sq), dk = empty_like(sk), dv = empty_like(sv);
    Tensor delta = Tensor::empty({d.B, d.NH, d.Tq}, DType::f32, g.device());
    ENGINE_GPU_CALL(g.device(), attention_backward, storage_of(g.dtype()), g.data_ptr(), sq.data_ptr(), sk.data_ptr(),
                    sv.data_ptr(), so.data_ptr(), lse.data<float>(), delta.data<float>(), dq.data_ptr(), dk.data_ptr(),
                    dv.data_ptr(), d, mask, nullptr);
    return std::vector<Tensor>{dq, dk, dv};
  });
  return out;
}

}  // namespace

const char* attention_impl_name(AttentionImpl impl) { return impl == AttentionImpl::cudnn ? "cudnn" : "ours"; }

AttentionImpl parse_attention_impl(const std::string& name) {
  if (name == "ours") return AttentionImpl::ours;
  if (name == "cudnn") return AttentionImpl::cudnn;
  ENGINE_USER_FAIL("attention '", name, "': ours or cudnn");
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal, AttentionImpl impl,
                 int64_t q_offset) {
  const DType t = check_float_inputs("attention", {q, k, v}, GpuKernel::yes);
  ENGINE_CHECK(q.ndim() == 4, "attention: q must be (B, T, NH, HS), got ", q.desc());
  ENGINE_CHECK(k.ndim() == 4 && k.size(0) == q.size(0) && k.size(2) == q.size(2) && k.size(3) == q.size(3) &&
                   v.shape() == k.shape(),
               "attention: q, k, v shapes differ: ", descs({q, k, v}));
  ENGINE_CHECK(q_offset >= 0 && q_offset + q.size(1) <= k.size(1), "attention: ", q.size(1), " queries at offset ",
               q_offset, " do not lie within ", k.size(1), " keys: ", descs({q, k}));
  if (impl == AttentionImpl::cudnn) {
    ENGINE_CHECK(k.shape() == q.shape() && q_offset == 0,
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
    return attention_gpu(q, k, v, t, causal, q_offset);
  }
  const cpu::AttentionDims d{q.size(0), q.size(1), k.size(1), q.size(2), HS, q_offset};
  const cpu::AttentionMask mask = causal == Causal::yes ? cpu::AttentionMask::causal : cpu::AttentionMask::none;
  Tensor out = empty_like(q);
  Tensor att = Tensor::empty({d.B, d.NH, d.Tq, d.Tk}, t, q.device());
  dispatch_float(t, [&]<typename F>() {
    cpu::attention_forward(q.data<F>(), k.data<F>(), v.data<F>(), out.data<F>(), att.data<F>(), d, mask);
  });
  const bool rec = needs_record({q, k, v});
  Tensor sq = rec ? q.detach() : Tensor(), sk = rec ? k.detach() : Tensor(), sv = rec ? v.detach() : Tensor();
  if (!rec) att = Tensor();
  record("attention", out, {q, k, v}, [sq, sk, sv, att, d, mask](const Tensor& g, const std::vector<bool>&) {
    Tensor dq = empty_like(sq), dk = empty_like(sk), dv = empty_like(sv);
    dispatch_float(g.dtype(), [&]<typename F>() {
      cpu::attention_backward(g.data<F>(), sq.data<F>(), sk.data<F>(), sv.data<F>(), att.data<F>(), dq.data<F>(),
                              dk.data<F>(), dv.data<F>(), d, mask);
    });
    return std::vector<Tensor>{dq, dk, dv};
  });
  return out;
}

Tensor attention_qkv(const Tensor& qkv, int64_t n_head, Causal causal, AttentionImpl impl) {
  const DType t = check_float_inputs("attention_qkv", {qkv}, GpuKernel::yes);
  ENGINE_CHECK(qkv.ndim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0, "attention_qkv: qkv ", qkv.desc(),
               " is not (B, T, 3 * ", n_head, " heads * head size)");
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, HS = C / n_head;
  const Shape heads{B, T, n_head, HS};
  if (on_gpu(qkv) || impl != AttentionImpl::ours) {
    const std::vector<Tensor> p = split(qkv, {C, C, C}, -1);
    return attention(p[0].reshape(heads), p[1].reshape(heads), p[2].reshape(heads), causal, impl);
  }
  const cpu::AttentionDims d{B, T, T, n_head, HS, 0, 3 * C};
  const cpu::AttentionMask mask = causal == Causal::yes ? cpu::AttentionMask::causal : cpu::AttentionMask::none;
  Tensor out = Tensor::empty(heads, t, qkv.device());
  Tensor att = Tensor::empty({B, n_head, T, T}, t, qkv.device());
  dispatch_float(t, [&]<typename F>() {
    const F* p = qkv.data<F>();
    cpu::attention_forward(p, p + C, p + 2 * C, out.data<F>(), att.data<F>(), d, mask);
  });
  const bool rec = needs_record({qkv});
  Tensor sqkv = rec ? qkv.detach() : Tensor();
  if (!rec) att = Tensor();
  record("attention_qkv", out, {qkv}, [sqkv, att, d, mask, C](const Tensor& g, const std::vector<bool>&) {
    Tensor dqkv = empty_like(sqkv);  // every element written: dq, dk, dv side by side
    dispatch_float(g.dtype(), [&]<typename F>() {
      const F* p = sqkv.data<F>();
      F* dp = dqkv.data<F>();
      cpu::attention_backward(g.data<F>(), p, p + C, p + 2 * C, att.data<F>(), dp, dp + C, dp + 2 * C, d, mask);
    });
    return std::vector<Tensor>{dqkv};
  });
  return out;
}

}  // namespace eng
