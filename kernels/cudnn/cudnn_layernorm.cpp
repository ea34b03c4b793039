// cuDNN's layernorm (kernels/cudnn/cudnn.h) through the cuDNN frontend's
// graph API: a `layernorm` node in training phase (y, and the per-row mean
// and inverse standard deviation it saves) and a `layernorm_backward` node
// (dx, dscale, dbias), the vendor row beside kernels/cuda/layernorm.cu in the
// workbench. The same math as ours: y = (x - mean) rstd w + b over the last
// dim C of N rows, rstd = 1 / sqrt(var + eps) with the biased variance;
// cuDNN's inv_variance is our rstd. f32 only (the workbench's storage).
// The rows are cuDNN's N of an (N, C, 1, 1) tensor; w and b are (1, C, 1, 1).
#include <vector>

#include "kernels/cudnn/cudnn_graph.h"

namespace eng {

namespace {

enum Uid : int64_t { kX = 1, kW, kB, kY, kMean, kRstd, kDY, kDX, kDW, kDB, kEps };

std::string what(int64_t N, int64_t C, LayernormPass pass) {
  return cat("layernorm (N=", N, " C=", C, pass == LayernormPass::forward ? ", forward)" : ", backward)");
}

std::shared_ptr<fe::graph::Graph> make_graph(int64_t N, int64_t C, LayernormPass pass, int sm_version) {
  auto g = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) g->set_sm_version(sm_version);
  g->set_io_data_type(fe::DataType_t::FLOAT)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides));
  };
  const std::vector<int64_t> rows{N, C, 1, 1}, rows_s{C, 1, C, C}, chan{1, C, 1, 1}, chan_s{C, 1, C, C};
  const std::vector<int64_t> stat{N, 1, 1, 1}, stat_s{1, 1, 1, 1};
  const auto x = tensor("x", kX, rows, rows_s), w = tensor("w", kW, chan, chan_s);
  if (pass == LayernormPass::forward) {
    const auto b = tensor("b", kB, chan, chan_s);
    auto e = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("eps")
                           .set_uid(kEps)
                           .set_dim({1, 1, 1, 1})
                           .set_stride({1, 1, 1, 1})
                           .set_data_type(fe::DataType_t::FLOAT)
                           .set_is_pass_by_value(true));
    auto opts = fe::graph::Layernorm_attributes().set_name("layernorm").set_forward_phase(fe::NormFwdPhase_t::TRAINING);
    opts.set_epsilon(e);
    auto [y, mean, rstd] = g->layernorm(x, w, b, opts);
    y->set_output(true).set_uid(kY);
    mean->set_output(true).set_uid(kMean).set_data_type(fe::DataType_t::FLOAT).set_dim(stat).set_stride(stat_s);
    rstd->set_output(true).set_uid(kRstd).set_data_type(fe::DataType_t::FLOAT).set_dim(stat).set_stride(stat_s);
  } else {
    const auto dy = tensor("dy", kDY, rows, rows_s);
    auto mean = tensor("mean", kMean, stat, stat_s), rstd = tensor("rstd", kRstd, stat, stat_s);
    mean->set_data_type(fe::DataType_t::FLOAT);
    rstd->set_data_type(fe::DataType_t::FLOAT);
    auto opts = fe::graph::Layernorm_backward_attributes().set_name("layernorm_backward");
    opts.set_saved_mean_and_inv_variance(mean, rstd);
    auto [dx, dw, db] = g->layernorm_backward(dy, x, w, opts);
    dx->set_output(true).set_uid(kDX);
    dw->set_output(true).set_uid(kDW).set_dim(chan).set_stride(chan_s);
    db->set_output(true).set_uid(kDB).set_dim(chan).set_stride(chan_s);
  }
  return g;
}

GraphPlan& plan_for(CudnnContext& ctx, int64_t N, int64_t C, LayernormPass pass) {
  ENGINE_CHECK(N >= 1 && C >= 1, "cuDNN layernorm: bad shape (", N, ", ", C, ")");
  const std::string w = what(N, C, pass);
  return cached_plan(ctx, w, w, [&] { return make_graph(N, C, pass, 0); });
}

}  // namespace

std::string cudnn_layernorm_validate(int64_t N, int64_t C, LayernormPass pass, int sm_version) {
  if (N < 1 || C < 1) return "every size must be at least 1";
  return validate_deviceless(make_graph(N, C, pass, sm_version));
}

size_t cudnn_layernorm_workspace(CudnnContext& ctx, int64_t N, int64_t C, LayernormPass pass) {
  return size_t(plan_for(ctx, N, C, pass).workspace);
}

void cudnn_layernorm_forward(CudnnContext& ctx, const float* x, const float* w, const float* b, float* y, float* mean,
                             float* rstd, int64_t N, int64_t C, double eps, void* workspace, void* stream) {
  GraphPlan& plan = plan_for(ctx, N, C, LayernormPass::forward);
  float e = float(eps);
  std::unordered_map<int64_t, void*> pack{{kX, const_cast<float*>(x)},
                                          {kW, const_cast<float*>(w)},
                                          {kB, const_cast<float*>(b)},
                                          {kY, y},
                                          {kMean, mean},
                                          {kRstd, rstd},
                                          {kEps, &e}};
  execute_plan(ctx, plan, pack, workspace, stream, what(N, C, LayernormPass::forward));
}

void cudnn_layernorm_backward(CudnnContext& ctx, const float* dy, const float* x, const float* w, const float* mean,
                              const float* rstd, float* dx, float* dw, float* db, int64_t N, int64_t C, void* workspace,
                              void* stream) {
  GraphPlan& plan = plan_for(ctx, N, C, LayernormPass::backward);
  std::unordered_map<int64_t, void*> pack{{kDY, const_cast<float*>(dy)},
                                          {kX, const_cast<float*>(x)},
                                          {kW, const_cast<float*>(w)},
                                          {kMean, const_cast<float*>(mean)},
                                          {kRstd, const_cast<float*>(rstd)},
                                          {kDX, dx},
                                          {kDW, dw},
                                          {kDB, db}};
  execute_plan(ctx, plan, pack, workspace, stream, what(N, C, LayernormPass::backward));
}

}  // namespace eng
