// cuDNN's fused attention (kernels/cudnn/cudnn.h), through the cuDNN
// frontend's graph API: one `sdpa` node for the forward, one `sdpa_backward`
// node for the backward, which the frontend lowers to cuDNN's flash-attention
// engines (FlashAttention-2's algorithm, as our kernels/cuda/attention.cu).
// A plan is built once per (shape, storage, mask, pass) and kept in the
// context; executing it is one call with the tensors' addresses.
//
// The workbench times these next to our kernels (bench/cases_attention.cpp:
// the same FLOP count for both rows, so the printed ratio is one of times).
#include <cmath>
#include <vector>

#include "kernels/cudnn/cudnn_graph.h"

namespace eng {

namespace {

// The tensors' ids in a plan's variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// The graph of one pass, not yet validated. sm_version > 0 targets that GPU
// architecture without asking the device (the frontend's deviceless mode).
std::shared_ptr<fe::graph::Graph> make_graph(const SdpaShape& s, SdpaPass pass, int sm_version) {
  auto g = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) g->set_sm_version(sm_version);
  g->set_io_data_type(s.st == gpu::Storage::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // (B, T, NH, HS) row-major seen as cuDNN's (B, NH, T, HS): the strides do
  // the permute. k and v (and their gradients) have NKV heads: cuDNN's sdpa
  // reads query head h's K/V from head h / (NH / NKV) (grouped-query
  // attention) and sums dK, dV over each group. Packed, q, k, v and their
  // gradients are pieces of rows (NH + 2 NKV) HS apart.
  const int64_t NKV = s.kv_heads(), C = s.NH * s.HS, Ckv = NKV * s.HS;
  const std::vector<int64_t> dims{s.B, s.NH, s.T, s.HS}, strides{s.T * C, s.HS, C, 1};
  const std::vector<int64_t> kv_dims{s.B, NKV, s.T, s.HS};
  const int64_t ld_q = s.packed ? C + 2 * Ckv : C, ld_kv = s.packed ? C + 2 * Ckv : Ckv;
  const std::vector<int64_t> q_strides{s.T * ld_q, s.HS, ld_q, 1}, kv_strides{s.T * ld_kv, s.HS, ld_kv, 1};
  const std::vector<int64_t> stats_dims{s.B, s.NH, s.T, 1}, stats_strides{s.NH * s.T, s.T, 1, 1};
  auto input = [&](const char* name, int64_t uid, const std::vector<int64_t>& d, const std::vector<int64_t>& st) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(d).set_stride(st));
  };
  auto output = [&](const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid, const std::vector<int64_t>& d,
                    const std::vector<int64_t>& st) { t->set_output(true).set_uid(uid).set_dim(d).set_stride(st); };
  const float scale = 1.f / std::sqrt(float(s.HS));
  const bool causal = s.mask == gpu::AttentionMask::causal;
  const auto q = input("q", kQ, dims, q_strides), k = input("k", kK, kv_dims, kv_strides),
             v = input("v", kV, kv_dims, kv_strides);
  if (pass == SdpaPass::forward) {
    auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(scale);
    opts.set_causal_mask(causal);
    auto [o, stats] = g->sdpa(q, k, v, opts);
    output(o, kO, dims, strides);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims)
        .set_stride(stats_strides);
  } else {
    const auto o = input("o", kO, dims, strides), dout = input("dO", kDO, dims, strides);
    const auto stats = g->tensor(fe::graph::Tensor_attributes()
                                     .set_name("stats")
                                     .set_uid(kStats)
                                     .set_dim(stats_dims)
                                     .set_stride(stats_strides)
                                     .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(scale);
    opts.set_causal_mask(causal);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
    output(dq, kDQ, dims, q_strides);
    output(dk, kDK, kv_dims, kv_strides);
    output(dv, kDV, kv_dims, kv_strides);
  }
  return g;
}

GraphPlan& plan_for(CudnnContext& ctx, const SdpaShape& s, SdpaPass pass) {
  const std::string why = cudnn_sdpa_unsupported(s);
  ENGINE_CHECK(why.empty(), "cuDNN attention (", s.str(), "): ", why);
  const std::string what = "attention (" + s.str() + (pass == SdpaPass::forward ? ", forward)" : ", backward)");
  return cached_plan(ctx, "sdpa " + what, what, [&] { return make_graph(s, pass, 0); });
}

}  // namespace

std::string cudnn_sdpa_validate(const SdpaShape& s, SdpaPass pass, int sm_version) {
  const std::string why = cudnn_sdpa_unsupported(s);
  if (!why.empty()) return why;
  return validate_deviceless(make_graph(s, pass, sm_version));
}

size_t cudnn_sdpa_workspace(CudnnContext& ctx, const SdpaShape& s, SdpaPass pass) {
  return size_t(plan_for(ctx, s, pass).workspace);
}

void cudnn_sdpa_forward(CudnnContext& ctx, const SdpaShape& s, const void* q, const void* k, const void* v, void* out,
                        float* stats, void* workspace, void* stream) {
  GraphPlan& plan = plan_for(ctx, s, SdpaPass::forward);
  std::unordered_map<int64_t, void*> pack{
      {kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)}, {kV, const_cast<void*>(v)}, {kO, out}, {kStats, stats}};
  execute_plan(ctx, plan, pack, workspace, stream, "attention (" + s.str() + ")");
}

void cudnn_sdpa_backward(CudnnContext& ctx, const SdpaShape& s, const void* q, const void* k, const void* v,
                         const void* out, const void* dout, const float* stats, void* dq, void* dk, void* dv,
                         void* workspace, void* stream) {
  GraphPlan& plan = plan_for(ctx, s, SdpaPass::backward);
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(q)},
                                          {kK, const_cast<void*>(k)},
                                          {kV, const_cast<void*>(v)},
                                          {kO, const_cast<void*>(out)},
                                          {kDO, const_cast<void*>(dout)},
                                          {kStats, const_cast<float*>(stats)},
                                          {kDQ, dq},
                                          {kDK, dk},
                                          {kDV, dv}};
  execute_plan(ctx, plan, pack, workspace, stream, "attention (" + s.str() + ")");
}

}  // namespace eng
