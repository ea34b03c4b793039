// ZeRO-1: AdamW over this rank's shard of the gradient buckets (see zero.h).
#include "comm/zero.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/graph.h"
#include "engine/ops.h"
#include "kernels/cuda/adamw8bit.h"

namespace eng::comm {

namespace {
char* at(const Tensor& t, int64_t elem) {
  return static_cast<char*>(t.data_ptr()) + size_t(elem) * dtype_size(t.dtype());
}
}  // namespace

ZeroAdamW::ZeroAdamW(std::vector<ParamGroup> groups, DistributedDataParallel& ddp, Communicator& comm, double lr,
                     double beta1, double beta2, double eps, bool eight_bit)
    : Optimizer(std::move(groups), lr), ddp_(ddp), comm_(comm), eight_bit_(eight_bit) {
  const std::vector<DdpBucket>& buckets = ddp.buckets();
  const int64_t r = comm.rank();
  // Where each of ddp's parameters sits: (bucket, offset).
  std::vector<std::pair<size_t, int64_t>> where(ddp.parameters().size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    ENGINE_CHECK(buckets[b].shard.defined(), "ZeroAdamW: the DistributedDataParallel is not in shard mode");
    for (size_t s = 0; s < buckets[b].params.size(); ++s) where[buckets[b].params[s]] = {b, buckets[b].offset[s]};
    weights_.push_back(Tensor::zeros({buckets[b].flat.numel()}, buckets[b].flat.dtype(), comm.device()));
  }
  std::vector<ParamGroup> inner_groups;
  for (const ParamGroup& g : groups_) {
    ParamGroup ig{{}, g.weight_decay, g.lr_scale};
    for (const Tensor& p : g.params) {
      size_t k = 0;
      while (k < ddp.parameters().size() && !ddp.parameters()[k].same(p)) ++k;
      ENGINE_CHECK(k < ddp.parameters().size(), "ZeroAdamW: parameter ", p.desc(), " is not in the ddp buckets");
      ENGINE_CHECK(p.dtype() == DType::f32, "ZeroAdamW: fp32 master weights only, got ", p.desc());
      const size_t i = params_.size();
      params_.push_back(p);
      quantized_.push_back(eight_bit && p.numel() >= AdamW8bit::kMin8bit);
      const auto [b, off] = where[k];
      ENGINE_CHECK(!eight_bit || (off % gpu::kQuantBlock == 0 && buckets[b].shard.numel() % gpu::kQuantBlock == 0),
                   "ZeroAdamW: 8-bit state needs the ddp buckets aligned to ", gpu::kQuantBlock,
                   " elements (DdpOptions::align), parameter ", p.desc(), " is at ", off);
      ddp_bucket_.push_back(b);
      ddp_offset_.push_back(off);
      // The part of [off, off + numel) inside this rank's shard [r*n, (r+1)*n).
      const int64_t n = buckets[b].shard.numel(), lo = std::max(off, r * n),
                    hi = std::min(off + p.numel(), (r + 1) * n);
      if (lo >= hi) continue;
      pieces_.push_back({i, b, lo - off, hi - lo});
      Tensor m = weights_[b].slice(lo, hi).detach();
      m.set_requires_grad(true);
      m.set_grad(buckets[b].shard.slice(lo - r * n, hi - r * n).detach());
      masters_.push_back(m);
      ig.params.push_back(m);
    }
    inner_groups.push_back(ig);
  }
  if (!eight_bit) {
    inner_ = std::make_unique<AdamW>(std::move(inner_groups), lr, beta1, beta2, eps);
    return;
  }
  auto q = std::make_unique<AdamW8bit>(std::move(inner_groups), lr, beta1, beta2, eps);
  std::vector<bool> piece_quantized;
  for (const Piece& pc : pieces_) piece_quantized.push_back(quantized_[pc.param]);
  q->set_quantized(piece_quantized);  // by the full tensor's size, as one process decides it
  inner_ = std::move(q);
}

std::vector<ZeroAdamW::Layout> ZeroAdamW::layouts() const {
  if (!eight_bit_) return {{"exp_avg", DType::f32, 1, false}, {"exp_avg_sq", DType::f32, 1, false}};
  return {{"exp_avg", DType::f32, 1, false},
          {"exp_avg_sq", DType::f32, 1, false},
          {"exp_avg", DType::u8, 1, true},
          {"exp_avg_sq", DType::u8, 1, true},
          {"exp_avg_absmax", DType::f32, gpu::kQuantBlock, true},
          {"exp_avg_sq_absmax", DType::f32, gpu::kQuantBlock, true}};
}

void ZeroAdamW::step() { ENGINE_FAIL("ZeroAdamW: call clip_and_step (the norm is global over the shards)"); }

void ZeroAdamW::load_pieces() {
  for (size_t j = 0; j < pieces_.size(); ++j) {
    const Piece& pc = pieces_[j];
    copy_within(comm_.device(), masters_[j].data_ptr(), at(params_[pc.param], pc.begin), size_t(pc.len) * 4);
  }
}

void ZeroAdamW::gather_params() {
  const int64_t r = comm_.rank();
  // One NCCL group for all buckets: launched together, one Work to wait on.
  std::vector<Work> works;
  comm_.group_start();
  for (size_t b = 0; b < weights_.size(); ++b) {
    const int64_t n = weights_[b].numel() / comm_.size();
    Tensor mine = weights_[b].slice(r * n, (r + 1) * n);
    works.push_back(comm_.all_gather(mine, weights_[b]));  // in place
  }
  works.push_back(comm_.group_end());
  for (Work& w : works) w.wait();
  for (size_t i = 0; i < params_.size(); ++i)
    copy_within(comm_.device(), params_[i].data_ptr(), at(weights_[ddp_bucket_[i]], ddp_offset_[i]),
                params_[i].nbytes());
}

void ZeroAdamW::step_shard(const Tensor* grad_scale) {
  ++t_;
  if (pieces_.empty()) return;  // all padding here: nothing to update, the collectives are the same
  inner_->set_lr(lr());
  if (grad_scale)
    inner_->step(*grad_scale);
  else
    inner_->step();
}

void ZeroAdamW::set_tensor_parallel(Communicator& tp, const std::vector<Tensor>& replicated,
                                    const std::vector<Tensor>& partial) {
  tp_ = &tp;
  auto flags = [&](const std::vector<Tensor>& which) {
    std::vector<bool> f(params_.size(), false);
    for (size_t i = 0; i < params_.size(); ++i)
      for (const Tensor& t : which) f[i] = f[i] || t.same(params_[i]);
    return f;
  };
  replicated_ = flags(replicated);
  partial_ = flags(partial);
}

void ZeroAdamW::sum_partial_over_tp() {
  if (!tp_) return;
  for (size_t j = 0; j < pieces_.size(); ++j)
    if (partial_[pieces_[j].param]) {
      Tensor g = masters_[j].grad();  // a view of this rank's bucket shard
      tp_->all_reduce(g, ReduceOp::sum).wait();
    }
}

void ZeroAdamW::set_pipeline(Communicator& pp, const std::vector<Tensor>& uncounted) {
  pp_ = &pp;
  uncounted_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i)
    for (const Tensor& u : uncounted) uncounted_[i] = uncounted_[i] || u.same(params_[i]);
}

std::vector<std::pair<double, std::vector<Tensor>>> ZeroAdamW::norm_terms() const {
  // Summed over tp below, a replicated parameter's squares would count tp
  // times: weigh them by 1/tp. A pipeline's uncounted copies weigh nothing.
  std::vector<Tensor> mine, rep;
  for (size_t j = 0; j < pieces_.size(); ++j) {
    const size_t i = pieces_[j].param;
    if (pp_ && uncounted_[i]) continue;
    (tp_ && replicated_[i] ? rep : mine).push_back(masters_[j]);
  }
  if (!tp_) return {{1.0, mine}};
  return {{1.0, mine}, {1.0 / double(tp_->size()), rep}};
}

double ZeroAdamW::clip_and_step(double max_norm) {
  NoGradGuard ng;
  load_pieces();
  sum_partial_over_tp();
  double local = 0;
  for (const auto& [w, ms] : norm_terms()) {
    const double n = grad_norm(ms);
    local += w * n * n;
  }
  Tensor ss = Tensor::full({1}, local, DType::f64, comm_.device());
  comm_.all_reduce(ss, ReduceOp::sum).wait();
  if (tp_) tp_->all_reduce(ss, ReduceOp::sum).wait();
  if (pp_) pp_->all_reduce(ss, ReduceOp::sum).wait();
  const double norm = std::sqrt(ss.to_f64_vector()[0]);
  const double coef = max_norm / (norm + 1e-6);  // as clip_grad_norm
  if (max_norm > 0 && coef < 1.0)
    for (const Tensor& m : masters_) {
      Tensor g = m.grad();
      scale_(g, coef);
    }
  step_shard(nullptr);
  gather_params();
  return norm;
}

Tensor ZeroAdamW::clip_and_step_device(double max_norm) {
  NoGradGuard ng;
  load_pieces();
  sum_partial_over_tp();
  Tensor ss;
  for (const auto& [w, ms] : norm_terms()) {
    Tensor t = grad_sum_squares(ms, comm_.device());
    if (w != 1.0) scale_(t, w);
    if (ss.defined())
      add_(ss, t);
    else
      ss = t.clone();
  }
  comm_.all_reduce(ss, ReduceOp::sum).wait();
  if (tp_) tp_->all_reduce(ss, ReduceOp::sum).wait();
  if (pp_) pp_->all_reduce(ss, ReduceOp::sum).wait();
  Tensor coef = clip_coefficient_from(ss, max_norm);
  Tensor factor = coef.slice(1, 2);
  step_shard(&factor);
  gather_params();
  return coef;
}

void ZeroAdamW::prepare_replay() {
  ++t_;
  if (pieces_.empty()) return;
  inner_->set_lr(lr());
  inner_->prepare_replay();
}

std::vector<std::pair<std::string, Tensor>> ZeroAdamW::state() const {
  const std::vector<std::pair<std::string, Tensor>> inner = inner_->state();
  std::vector<std::pair<std::string, Tensor>> out;
  const int64_t P = comm_.size(), r = comm_.rank(), n_params = int64_t(params_.size());
  // Step counts: each parameter's from any rank holding a piece of it.
  // (Whether moments exist is decided by t_, the same on every rank, so
  // every rank takes part in the same gathers.)
  const bool has_moments = t_ > 0;
  Tensor c = Tensor::zeros({2 * n_params}, DType::f64);
  if (has_moments) {
    const std::vector<double> piece_steps = find_state(inner, "step", {int64_t(pieces_.size())}).to_f64_vector();
    for (size_t j = 0; j < pieces_.size(); ++j) {
      c.data<double>()[pieces_[j].param] = piece_steps[j];
      c.data<double>()[size_t(n_params) + pieces_[j].param] = 1;
    }
  }
  Tensor dc = c.to(comm_.device());
  comm_.all_reduce(dc, ReduceOp::sum).wait();
  const std::vector<double> tot = dc.to_f64_vector();
  if (has_moments) {
    // Per layout: each bucket's shard assembled from the pieces (in units of
    // the layout: elements, or 256-element blocks), gathered, cut per parameter.
    std::vector<std::vector<std::pair<std::string, Tensor>>> per_param(static_cast<size_t>(n_params));
    for (const Layout& L : layouts()) {
      const size_t es = dtype_size(L.dt);
      std::vector<Tensor> full;
      for (size_t b = 0; b < weights_.size(); ++b) {
        const int64_t n = weights_[b].numel() / P;
        Tensor shard = Tensor::zeros({n / L.unit}, L.dt, comm_.device());
        for (size_t j = 0; j < pieces_.size(); ++j) {
          const Piece& pc = pieces_[j];
          if (pc.bucket != b || quantized_[pc.param] != L.quantized) continue;
          const int64_t entries = (pc.len + L.unit - 1) / L.unit;
          const Tensor& m = find_state(inner, cat(L.name, ".", j), {entries});
          const int64_t into = (ddp_offset_[pc.param] + pc.begin - r * n) / L.unit;
          copy_within(comm_.device(), static_cast<char*>(shard.data_ptr()) + size_t(into) * es, m.data_ptr(),
                      size_t(entries) * es);
        }
        Tensor all = Tensor::empty({n / L.unit * P}, L.dt, comm_.device());
        comm_.all_gather(shard, all).wait();
        full.push_back(all.to(kCPU));
      }
      for (int64_t i = 0; i < n_params; ++i) {
        if (quantized_[size_t(i)] != L.quantized) continue;
        const Tensor& p = params_[size_t(i)];
        const int64_t at = ddp_offset_[size_t(i)] / L.unit, entries = (p.numel() + L.unit - 1) / L.unit;
        Tensor t = full[ddp_bucket_[size_t(i)]].slice(at, at + entries).clone();
        per_param[size_t(i)].emplace_back(cat(L.name, ".", i), L.quantized ? t : t.reshape(p.shape()));
      }
    }
    for (auto& entries : per_param)
      for (auto& e : entries) out.push_back(std::move(e));
  }
  Tensor st = Tensor::empty({n_params}, DType::f64);
  for (int64_t i = 0; i < n_params; ++i)
    st.data<double>()[i] = tot[size_t(n_params + i)] > 0 ? tot[size_t(i)] / tot[size_t(n_params + i)] : 0;
  out.emplace_back("step", st);
  out.emplace_back("optimizer_steps", Tensor::full({1}, double(t_), DType::f64));
  return out;
}

void ZeroAdamW::load_state(const std::vector<std::pair<std::string, Tensor>>& state) {
  t_ = int64_t(find_state(state, "optimizer_steps", {1}).to_f64_vector()[0]);
  std::vector<std::pair<std::string, Tensor>> mine;
  mine.emplace_back("optimizer_steps", find_state(state, "optimizer_steps", {1}));
  if (!state_is_fresh(state, "exp_avg.0")) {
    const std::vector<double> steps = find_state(state, "step", {int64_t(params_.size())}).to_f64_vector();
    Tensor st = Tensor::empty({int64_t(pieces_.size())}, DType::f64);
    for (size_t j = 0; j < pieces_.size(); ++j) {
      const Piece& pc = pieces_[j];
      const Tensor& p = params_[pc.param];
      for (const Layout& L : layouts()) {
        if (quantized_[pc.param] != L.quantized) continue;
        const int64_t entries = (p.numel() + L.unit - 1) / L.unit, at = pc.begin / L.unit;
        const Tensor& full = find_state(state, cat(L.name, ".", pc.param), L.quantized ? Shape{entries} : p.shape());
        ENGINE_CHECK(full.dtype() == L.dt, "optimizer state '", L.name, ".", pc.param, "' is ", full.desc(),
                     ", expected ", dtype_name(L.dt));
        mine.emplace_back(cat(L.name, ".", j), full.reshape({entries}).slice(at, at + (pc.len + L.unit - 1) / L.unit));
      }
      st.data<double>()[j] = steps[pc.param];
    }
    mine.emplace_back("step", st);
  }
  inner_->load_state(mine);
}

size_t ZeroAdamW::shard_state_bytes() const {
  size_t bytes = 0;  // the moments of this rank's pieces (allocated at the first step)
  for (const Piece& pc : pieces_)
    bytes += quantized_[pc.param] ? size_t(2 * pc.len + 8 * gpu::quant_blocks(pc.len)) : size_t(8 * pc.len);
  return bytes;
}

}  // namespace eng::comm
