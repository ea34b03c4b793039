// A stage's plan, run (pipeline_step.h).
#include "models/train/pipeline_step.h"

#include <chrono>
#include <map>
#include <optional>

#include "base/error.h"
#include "comm/world.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng::models {

using comm::PipeMsg;
using comm::PipeOp;
using P2pOp = comm::Communicator::P2pOp;

std::pair<int64_t, int64_t> stage_blocks(const std::vector<int64_t>& layers, int k) {
  int64_t first = 0;
  for (int j = 0; j < k; ++j) first += layers[size_t(j)];
  return {first, first + layers[size_t(k)]};
}

std::string stage_summary(const std::vector<int64_t>& layers) {
  std::string out = "pipeline stages (blocks):";
  for (size_t k = 0; k < layers.size(); ++k) {
    const auto [first, end] = stage_blocks(layers, int(k));
    out += cat(k ? ", " : " ", end - first == 1 ? cat(first) : cat(first, "-", end - 1));
  }
  return out;
}

int parameter_stage(const std::string& name, const std::string& block_prefix,
                    const std::vector<std::string>& last_prefixes, const std::vector<int64_t>& layers) {
  for (const std::string& p : last_prefixes)
    if (name.rfind(p, 0) == 0) return int(layers.size()) - 1;
  if (name.rfind(block_prefix, 0) != 0) return 0;
  const int64_t block = std::stoll(name.substr(block_prefix.size()));
  for (int k = 0; k < int(layers.size()); ++k)
    if (block < stage_blocks(layers, k).second) return k;
  ENGINE_FAIL("pipeline: parameter ", name, " beyond the stages' blocks");
}

void BubbleMeter::add(const PipelineStep& p) {
  starts_.push_back(double(p.last_start_us()));
  ends_.push_back(double(p.last_end_us()));
  busy_s_ += p.last_busy_seconds();
}

double BubbleMeter::idle() const {
  const std::vector<double> first = comm::all_reduce_host(starts_, comm::HostOp::min, "the steps' starts");
  const std::vector<double> last = comm::all_reduce_host(ends_, comm::HostOp::max, "the steps' ends");
  double span = 0;
  for (size_t i = 0; i < first.size(); ++i) span += (last[i] - first[i]) * 1e-6;
  return comm::all_reduce_host(span > 0 ? 1.0 - busy_s_ / span : 0.0, comm::HostOp::sum, "the stages' idle time") /
         double(comm::world().size);
}

void sum_tied_gradients(const std::vector<Tensor>& tied, comm::Communicator& embed,
                        const comm::DistributedDataParallel* shards) {
  for (const Tensor& p : tied) {
    Tensor g = shards ? shards->bucket_holding(p).shard : p.grad();
    embed.all_reduce(g, comm::ReduceOp::sum).wait();
  }
}

DType stage_dtype(DType compute, Device dev) { return dev.type == DeviceType::cpu ? DType::f32 : compute; }

PipelineStep::PipelineStep(comm::Communicator& pp, comm::PipeSchedule schedule, int64_t m)
    : pp_(pp), m_(m), plan_(comm::pipeline_plan(schedule, pp.size(), pp.rank(), m)) {}

namespace {

// The micro-batches in flight on this stage, by number.
struct Flight {
  Tensor in;       // the received activation (a leaf); undefined on stage 0
  Tensor out;      // what forward returned (the loss on the last stage)
  Tensor grad_in;  // the received gradient of `out` (not on the last stage)
};

void check_io(const Tensor& t, const StageIo& io, const char* what, int64_t m, int stage) {
  ENGINE_CHECK(t.defined() && t.shape() == io.shape && t.dtype() == io.dtype, "pipeline stage ", stage, ": ", what,
               " of micro-batch ", m, " is ", t.defined() ? t.desc() : "undefined", ", the stages pass ",
               shape_str(io.shape), " ", dtype_name(io.dtype));
}

std::string describe(const std::vector<PipeMsg>& batch) {
  std::string s = "p2p";
  for (size_t i = 0; i < batch.size(); ++i)
    s += cat(i ? ", " : " ", batch[i].send ? "send " : "recv ", batch[i].kind == PipeMsg::act ? "act " : "grad ",
             batch[i].micro);
  return s;
}

}  // namespace

std::vector<Tensor> PipelineStep::run(const StageFn& forward, const StageIo& io, comm::DistributedDataParallel* ddp) {
  const int s = stage();
  using Clock = std::chrono::steady_clock;
  auto wall_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  start_us_ = wall_us();
  busy_s_ = 0;
  std::map<int64_t, Flight> flight;
  std::vector<Tensor> losses(last() ? size_t(m_) : 0);
  for (const comm::PipeStep& step : plan_) {
    if (!step.batch.empty()) {
      // The sends were kept in `flight` (or are its gradients), alive until the wait.
      std::vector<P2pOp> ops;
      for (const PipeMsg& msg : step.batch) {
        Flight& f = flight[msg.micro];
        const bool act = msg.kind == PipeMsg::act;
        if (msg.send) {
          const Tensor t = act ? f.out.detach() : f.in.grad();
          check_io(t, io, act ? "the output" : "the input's gradient", msg.micro, s);
          ops.push_back({P2pOp::send, t, act ? s + 1 : s - 1});
        } else {
          Tensor buf = Tensor::empty(io.shape, io.dtype, pp_.device());
          (act ? f.in : f.grad_in) = buf;
          ops.push_back({P2pOp::recv, buf, act ? s - 1 : s + 1});
        }
      }
      const profile::Range r(describe(step.batch));
      pp_.send_recv(ops).wait();
      // Sent gradients are done with: the micro-batch is finished here.
      for (const PipeMsg& msg : step.batch)
        if (msg.send && msg.kind == PipeMsg::grad) flight.erase(msg.micro);
    }
    if (!step.has_op) continue;
    const int64_t i = step.op.micro;
    Flight& f = flight[i];
    const auto pass_start = Clock::now();
    if (step.op.kind == PipeOp::forward) {
      const profile::Range r(cat("forward ", i));
      if (f.in.defined()) f.in.set_requires_grad(true);
      f.out = forward(i, f.in);
      if (last()) {
        losses[size_t(i)] = f.out.detach();
        if (m_ > 1) f.out = scale(f.out, 1.0 / double(m_));
      } else {
        check_io(f.out, io, "the output", i, s);
      }
    } else {
      const profile::Range r(cat("backward ", i));
      if (ddp) ddp->set_sync(i == m_ - 1);  // both schedules end with the last micro-batch's backward
      if (last())
        f.out.backward();
      else
        f.out.backward(f.grad_in);
      f.out = Tensor(), f.grad_in = Tensor();  // the graph and its activations go
      if (first()) flight.erase(i);            // nothing to send back
    }
    busy_s_ += std::chrono::duration<double>(Clock::now() - pass_start).count();
  }
  end_us_ = wall_us();
  ENGINE_CHECK(flight.empty(), "pipeline stage ", s, ": ", flight.size(), " micro-batch(es) left unfinished");
  return losses;
}

std::vector<Tensor> PipelineStep::forward_only(int64_t count, const StageFn& forward, const StageIo& io) {
  NoGradGuard no_grad;
  const int s = stage();
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < count; ++i) {
    Tensor in;
    if (!first()) {
      in = Tensor::empty(io.shape, io.dtype, pp_.device());
      const profile::Range r(cat("p2p recv act ", i));
      pp_.recv(in, s - 1).wait();
    }
    Tensor out;
    {
      const profile::Range r(cat("forward ", i));
      out = forward(i, in);
    }
    if (last()) {
      outs.push_back(out);
      continue;
    }
    // Forward only: every message goes one way, so lone sends cannot wait on each other.
    check_io(out, io, "the output", i, s);
    const profile::Range r(cat("p2p send act ", i));
    pp_.send(out, s + 1).wait();
  }
  return outs;
}

}  // namespace eng::models
