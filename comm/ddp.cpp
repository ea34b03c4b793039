// Gradient buckets and their overlapped all-reduces (see ddp.h).
#include "comm/ddp.h"

#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "comm/ddp_naive.h"
#include "comm/watchdog.h"
#include "engine/graph.h"
#include "engine/profile.h"

namespace eng::comm {

struct DistributedDataParallel::State {
  struct Flight {      // a bucket's progress in this step
    size_t ready = 0;  // gradients copied in
    Work work;
    bool started = false;
  };
  std::vector<DdpBucket> buckets;
  std::vector<Flight> flight;
  bool shard = false;
  bool naive = false;
  std::vector<Tensor> params;
  std::vector<size_t> bucket_of, slot_of;  // per parameter
  Communicator* comm = nullptr;
  bool sync = true;
  size_t next_start = 0;  // buckets start in index order, the same on every rank

  void on_grad(size_t i, const Tensor& grad) {
    if (!sync) return;
    DdpBucket& b = buckets[bucket_of[i]];
    Flight& f = flight[bucket_of[i]];
    const size_t slot = slot_of[i];
    ENGINE_CHECK(grad.numel() == params[i].numel() && grad.dtype() == b.flat.dtype(), "ddp: gradient of parameter ", i,
                 " is ", grad.desc(), ", the parameter is ", params[i].desc());
    copy_within(b.flat.device(),
                static_cast<char*>(b.flat.data_ptr()) + b.offset[slot] * int64_t(dtype_size(grad.dtype())),
                grad.data_ptr(), grad.nbytes());
    ++f.ready;
    start_ready();
    for (Flight& o : flight)  // drive MPI's progress on the ones in flight
      if (o.started) o.work.test();
  }
  void start_ready() {
    while (next_start < buckets.size() && flight[next_start].ready == buckets[next_start].params.size()) {
      DdpBucket& b = buckets[next_start];
      Flight& f = flight[next_start++];
      const std::string label = cat("gradient bucket ", next_start, " of ", buckets.size());
      const profile::Range r(label);  // the launch, on the profiler's timeline inside backward
      set_op_label(label);            // for the watchdog's message
      f.work = shard ? comm->reduce_scatter(b.flat, b.shard, ReduceOp::avg) : comm->all_reduce(b.flat, ReduceOp::avg);
      set_op_label("");
      f.started = true;
    }
  }
};

DistributedDataParallel::DistributedDataParallel(std::vector<Tensor> params, Communicator& comm, DdpOptions opt)
    : s_(std::make_shared<State>()) {
  ENGINE_CHECK(opt.bucket_mb > 0 && opt.first_bucket_mb > 0, "ddp: bucket sizes must be > 0 MiB");
  ENGINE_CHECK(opt.align >= 1, "ddp: align must be >= 1, got ", opt.align);
  ENGINE_CHECK(!(opt.naive && opt.shard), "ddp: naive mode has no buckets to shard (ZeRO needs the bucketed mode)");
  s_->params = std::move(params);
  s_->comm = &comm;
  s_->shard = opt.shard;
  s_->naive = opt.naive;
  for (size_t k = 0; k < s_->params.size(); ++k)
    ENGINE_CHECK(s_->params[k].device() == comm.device(), "ddp: parameter ", k, " is ", s_->params[k].desc(),
                 ", the dp communicator is on ", comm.device().str());
  if (opt.naive) return;  // finish() does it all
  const size_t n = s_->params.size();
  s_->bucket_of.assign(n, 0);
  s_->slot_of.assign(n, 0);
  // Reverse registration order; a new bucket when the current one is full
  // or the dtype changes. Deterministic: every rank gets the same buckets.
  size_t bytes = 0;
  bool closed = false;  // the last bucket holds a parameter that stays alone
  for (size_t k = n; k-- > 0;) {
    const Tensor& p = s_->params[k];
    bool alone = false;
    for (const Tensor& a : opt.alone) alone = alone || a.same(p);
    const double cap = (s_->buckets.size() <= 1 ? opt.first_bucket_mb : opt.bucket_mb) * 1048576.0;
    const bool full = !s_->buckets.empty() && double(bytes + p.nbytes()) > cap && bytes > 0;
    if (s_->buckets.empty() || full || closed || (alone && bytes > 0) || s_->buckets.back().flat.dtype() != p.dtype()) {
      s_->buckets.emplace_back();
      s_->buckets.back().flat = Tensor::empty({0}, p.dtype(), p.device());  // sized below
      bytes = 0;
    }
    DdpBucket& b = s_->buckets.back();
    s_->bucket_of[k] = s_->buckets.size() - 1;
    s_->slot_of[k] = b.params.size();
    const int64_t end = b.params.empty() ? 0 : b.offset.back() + s_->params[b.params.back()].numel();
    b.offset.push_back((end + opt.align - 1) / opt.align * opt.align);
    b.params.push_back(k);
    bytes += p.nbytes();
    closed = alone;
  }
  const int64_t P = comm.size();
  for (DdpBucket& b : s_->buckets) {
    int64_t total = b.offset.back() + s_->params[b.params.back()].numel();
    if (opt.shard) total = (total + P * opt.align - 1) / (P * opt.align) * (P * opt.align);  // the padding stays zero
    b.flat = Tensor::zeros({total}, b.flat.dtype(), comm.device());
    if (opt.shard) b.shard = Tensor::zeros({total / P}, b.flat.dtype(), comm.device());
  }
  s_->flight.resize(s_->buckets.size());
  std::weak_ptr<State> weak = s_;
  for (size_t k = 0; k < n; ++k)
    s_->params[k].add_final_grad_hook([weak, k](Tensor& g) {
      if (auto s = weak.lock()) s->on_grad(k, g);
    });
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& f : s_->flight) f.work.wait();
}

void DistributedDataParallel::broadcast_parameters() {
  for (Tensor& p : s_->params) s_->comm->broadcast(p, 0).wait();
}

void DistributedDataParallel::set_sync(bool sync) { s_->sync = sync; }

void DistributedDataParallel::finish() {
  State& s = *s_;
  if (s.naive) {
    all_reduce_each_gradient(s.params, *s.comm);
    return;
  }
  for (size_t i = 0; i < s.buckets.size(); ++i)
    if (s.flight[i].ready != s.buckets[i].params.size())
      for (size_t k : s.buckets[i].params)
        ENGINE_CHECK(s.params[k].grad().defined(), "ddp: parameter ", k, " ", s.params[k].desc(),
                     " received no gradient in this backward (unused in the loss?)");
  for (size_t i = 0; i < s.buckets.size(); ++i) {
    DdpBucket& b = s.buckets[i];
    State::Flight& f = s.flight[i];
    ENGINE_CHECK(f.ready == b.params.size(), "ddp: bucket of ", b.params.size(), " parameters got ", f.ready,
                 " final gradients: was set_sync(true) before the last backward?");
    f.work.wait();
    const size_t es = dtype_size(b.flat.dtype());
    for (size_t slot = 0; slot < b.params.size() && !s.shard; ++slot) {
      Tensor g = s.params[b.params[slot]].grad();
      copy_within(b.flat.device(), g.data_ptr(),
                  static_cast<const char*>(b.flat.data_ptr()) + size_t(b.offset[slot]) * es, g.nbytes());
    }
    f = State::Flight();
  }
  s.next_start = 0;
}

const std::vector<Tensor>& DistributedDataParallel::parameters() const { return s_->params; }
const std::vector<DdpBucket>& DistributedDataParallel::buckets() const { return s_->buckets; }

const DdpBucket& DistributedDataParallel::bucket_holding(const Tensor& param) const {
  for (size_t k = 0; k < s_->params.size(); ++k)
    if (s_->params[k].same(param)) return s_->buckets[s_->bucket_of[k]];
  ENGINE_FAIL("ddp: ", param.desc(), " is none of its parameters");
}

int DistributedDataParallel::num_buckets() const { return int(s_->buckets.size()); }

std::string DistributedDataParallel::bucket_summary() const {
  if (s_->naive) return std::to_string(s_->params.size()) + " all-reduces after the backward (--ddp naive)";
  std::string out = std::to_string(s_->buckets.size()) + " buckets (";
  for (size_t i = 0; i < s_->buckets.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.2f", i ? ", " : "", double(s_->buckets[i].flat.nbytes()) / 1048576.0);
    out += buf;
  }
  return out + " MiB)";
}

}  // namespace eng::comm
