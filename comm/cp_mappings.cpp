// The cp mappings (cp_mappings.h), built from the tp mappings' row moves
// and layout ops, so autograd derives most backwards.
#include "comm/cp_mappings.h"

#include "base/error.h"
#include "comm/tp_mappings.h"
#include "engine/autograd.h"

namespace eng::comm {

Tensor gather_seq_from_cp(const Tensor& x, Communicator& cp) {
  if (cp.size() == 1) return x;
  ENGINE_CHECK(x.ndim() >= 2, "gather_seq_from_cp: needs (B, T, ...), got ", x.desc());
  const int64_t P = cp.size(), B = x.size(0), Tl = x.size(1), R = x.numel() / (B * Tl);
  // All-gather the rows: (P B Tl, R), rank-major; then rank r's slice goes to positions [r Tl, (r+1) Tl).
  const Tensor all = gather_from_sp(x.reshape({B * Tl, R}), cp);
  Shape os = x.shape();
  os[1] = P * Tl;
  return permute(all.reshape({P, B, Tl * R}), {1, 0, 2}).reshape(os);
}

Tensor all_reduce_cp(const Tensor& x, Communicator& cp) {
  if (cp.size() == 1) return x;
  Communicator* c = &cp;
  auto summed = [c](const Tensor& t) {
    Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
    c->all_reduce(t, out, ReduceOp::sum).wait();
    return out;
  };
  Tensor out = summed(x);
  record("all_reduce_cp", out, {x},
         [summed](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{summed(g)}; });
  return out;
}

Tensor cp_attention(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal, Communicator& cp,
                    AttentionImpl impl) {
  if (cp.size() == 1) return attention(q, k, v, causal, impl);
  return attention(q, gather_seq_from_cp(k, cp), gather_seq_from_cp(v, cp), causal, impl, cp.rank() * q.size(1));
}

Tensor packed_attention(const Tensor& qkv, int64_t n_head, Causal causal, Communicator* cp, AttentionImpl impl,
                        int64_t n_kv_head) {
  if (!cp) return attention_qkv(qkv, n_head, causal, impl, n_kv_head);
  const int64_t NKV = n_kv_head ? n_kv_head : n_head;
  ENGINE_CHECK(qkv.ndim() == 3 && n_head > 0 && NKV > 0 && n_head % NKV == 0 && qkv.size(2) % (n_head + 2 * NKV) == 0,
               "packed_attention: qkv must be (B, T, (", n_head, " + 2 x ", NKV, ") heads x head size), got ",
               qkv.desc());
  const int64_t HS = qkv.size(2) / (n_head + 2 * NKV), C = n_head * HS, Ckv = NKV * HS;
  const std::vector<Tensor> parts = split(qkv, {C, Ckv, Ckv}, -1);
  const int64_t B = qkv.size(0), T = qkv.size(1);
  return cp_attention(parts[0].reshape({B, T, n_head, HS}), parts[1].reshape({B, T, NKV, HS}),
                      parts[2].reshape({B, T, NKV, HS}), causal, *cp, impl);
}

Tensor cp_slice(const Tensor& x, int dim, const Communicator& cp) {
  if (cp.size() == 1) return x;
  const int64_t n = x.size(dim);
  ENGINE_CHECK(n % cp.size() == 0, "cp: dim ", dim, " of ", x.desc(), " (", n, " positions) does not divide by cp ",
               cp.size());
  NoGradGuard no_grad;
  const int64_t l = n / cp.size();
  if (x.dtype() != DType::i32) return narrow(x, dim, cp.rank() * l, l);
  // Token ids and labels, on the host (the ops' kernels are for floats).
  ENGINE_CHECK(x.device().type == DeviceType::cpu && dim >= 0, "cp: i32 ", x.desc(), " must be sliced on the host");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= x.size(d);
  for (int d = dim + 1; d < x.ndim(); ++d) inner *= x.size(d);
  Shape os = x.shape();
  os[size_t(dim)] = l;
  Tensor out = Tensor::empty(os, DType::i32);
  const int32_t* src = x.data<int32_t>();
  int32_t* dst = out.data<int32_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < l * inner; ++i) dst[o * l * inner + i] = src[(o * n + cp.rank() * l) * inner + i];
  return out;
}

}  // namespace eng::comm
