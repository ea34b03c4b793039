// Causal self-attention on (B, T, NH, HS). The cpu path saves the (B, NH, T, T)
// probabilities; the fused CUDA kernel (a later issue) saves only logsumexp.
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const DType t = check_float_inputs("attention", {q, k, v});
  ENGINE_CHECK(q.ndim() == 4, "attention: q must be (B, T, NH, HS), got ", q.desc());
  ENGINE_CHECK(k.shape() == q.shape() && v.shape() == q.shape(),
               "attention: q, k, v shapes differ: ", descs({q, k, v}));
  const int64_t B = q.size(0), T = q.size(1), NH = q.size(2), HS = q.size(3);
  Tensor out = empty_like(q);
  Tensor att = Tensor::empty({B, NH, T, T}, t, q.device());
  dispatch_float(t, [&]<typename F>() {
    cpu::attention_forward(q.data<F>(), k.data<F>(), v.data<F>(), out.data<F>(), att.data<F>(), B, T, NH, HS);
  });
  const bool rec = needs_record({q, k, v});
  Tensor sq = rec ? q.detach() : Tensor(), sk = rec ? k.detach() : Tensor(), sv = rec ? v.detach() : Tensor();
  if (!rec) att = Tensor();
  record("attention", out, {q, k, v}, [sq, sk, sv, att, B, T, NH, HS](const Tensor& g, const std::vector<bool>&) {
    Tensor dq = empty_like(sq), dk = empty_like(sk), dv = empty_like(sv);
    dispatch_float(g.dtype(), [&]<typename F>() {
      cpu::attention_backward(g.data<F>(), sq.data<F>(), sk.data<F>(), sv.data<F>(), att.data<F>(), dq.data<F>(),
                              dk.data<F>(), dv.data<F>(), B, T, NH, HS);
    });
    return std::vector<Tensor>{dq, dk, dv};
  });
  return out;
}

}  // namespace eng
