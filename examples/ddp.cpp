// ddp: data parallelism in three steps, each checked against the serial run.
// Every rank holds the whole model (a three-layer MLP) and a slice of the
// batch; after the backward the gradients are averaged over the ranks, so
// every replica takes the step the whole batch would give one process:
//   1. naive      one all-reduce per gradient, after the backward;
//   2. bucketed   gradients copied into a few flat buckets, one all-reduce
//                 per bucket (the collective's latency paid a few times, not
//                 once per tensor), still after the backward;
//   3. overlapped each bucket's all-reduce starts from the final-gradient
//                 hook of its last gradient, while the backward of earlier
//                 layers goes on (PyTorch's DistributedDataParallel). On
//                 the cpu, MPI moves a non-blocking collective along only
//                 inside an MPI call, so every hook also polls the ones in
//                 flight (Work::test), as comm/ddp.cpp does.
// The average of the ranks' mean losses is the mean loss of the whole batch
// (equal slices), so each rank also runs the serial model on the whole
// batch and checks every averaged gradient against it, every step.
//   bash scripts/mpirun.sh -np 2 ./build/examples/ddp      (-np 1, 2, 4 or 8)
// At full strength: comm/ddp_naive.cpp and comm/ddp.cpp (buckets of 25 MiB,
// gradient accumulation's no_sync, ZeRO's shard mode, the cuda stream), built
// in models/train/train.cpp (`ddp = ...`) and waited for in
// models/train/train_step.cpp.
#include <cstdio>
#include <memory>
#include <vector>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "examples/example_util.h"

using namespace eng;
using example::max_diff;
using example::param;

namespace {
constexpr int64_t kBatch = 32, kIn = 16, kHidden = 64, kSteps = 10;
// Small, so the 6 gradients fill 3 buckets. A bucket closes when the next
// gradient would overflow it; a gradient larger than the cap (W2's 4096)
// gets a bucket of its own.
constexpr int64_t kBucketElems = 2048;
constexpr double kLr = 0.05;

Tensor loss_of(const std::vector<Tensor>& p, const Tensor& x, const Tensor& target) {
  const Tensor h1 = gelu(linear(x, p[0], p[1]));
  const Tensor h2 = gelu(linear(h1, p[2], p[3]));
  return mse_loss(linear(h2, p[4], p[5]), target);
}

// A flat buffer holding some gradients side by side.
struct Bucket {
  Tensor flat;
  std::vector<size_t> params;   // which parameters, in the order they were placed
  std::vector<int64_t> offset;  // where each starts in flat
  size_t pending = 0;           // overlapped: gradients not final yet this backward
  comm::Work work;
};

// Buckets in reverse parameter order: the backward finishes the last
// layer's gradients first, so the first bucket is ready first.
std::vector<Bucket> make_buckets(const std::vector<Tensor>& ps) {
  std::vector<Bucket> bs;
  int64_t used = kBucketElems;  // start a new bucket at the first parameter
  for (size_t i = ps.size(); i-- > 0;) {
    if (used + ps[i].numel() > kBucketElems) {
      bs.emplace_back();
      used = 0;
    }
    bs.back().params.push_back(i);
    bs.back().offset.push_back(used);
    used += ps[i].numel();
  }
  for (Bucket& b : bs) b.flat = Tensor::zeros({b.offset.back() + ps[b.params.back()].numel()});
  return bs;
}

Tensor place(Bucket& b, size_t slot, int64_t n) { return b.flat.slice(b.offset[slot], b.offset[slot] + n); }

void copy_in(Bucket& b, size_t slot, const Tensor& grad) { place(b, slot, grad.numel()).copy_from(grad.reshape({-1})); }

void copy_out(Bucket& b, const std::vector<Tensor>& ps) {
  for (size_t s = 0; s < b.params.size(); ++s) {
    Tensor g = ps[b.params[s]].grad();
    g.copy_from(place(b, s, g.numel()).reshape(g.shape()));
  }
}

struct Run {
  const char* mode;
  int collectives = 0;  // all-reduces a step
  double loss = 0, worst = 0;
};

// One mode: 10 steps of dp against 10 steps of the serial model, from the same weights.
Run train(const char* mode, comm::Communicator& dp, const std::string& bug) {
  const int P = dp.size(), r = dp.rank();
  const int64_t b = kBatch / P;  // rows per rank
  std::vector<Tensor> init = {Tensor::randn({kHidden, kIn}, 1, 0.3f),     Tensor::randn({kHidden}, 2, 0.1f),
                              Tensor::randn({kHidden, kHidden}, 3, 0.2f), Tensor::randn({kHidden}, 4, 0.1f),
                              Tensor::randn({kIn, kHidden}, 5, 0.2f),     Tensor::randn({kIn}, 6, 0.1f)};
  std::vector<Tensor> ps, serial;
  for (const Tensor& t : init) ps.push_back(param(t)), serial.push_back(param(t));
  const comm::ReduceOp op = bug == "sum" ? comm::ReduceOp::sum : comm::ReduceOp::avg;
  std::vector<Bucket> buckets = make_buckets(ps);
  const std::string m = mode;
  if (m == "overlapped") {
    // When a parameter's gradient is final, copy it into its bucket; the
    // bucket's last one starts the bucket's all-reduce, which runs while the
    // backward goes on to earlier layers. The hooks are registered once and
    // fire in every backward after (pending is reset each step). They fire
    // in the same order on every rank (the same graph), so every rank starts
    // the same collectives in the same order, as MPI and NCCL require.
    for (Bucket& bk : buckets)
      for (size_t s = 0; s < bk.params.size(); ++s) {
        if (bug == "no_hook" && bk.params[s] == 0) continue;  // W1's bucket then never starts
        ps[bk.params[s]].add_final_grad_hook([&bk, &buckets, s, op, &dp](Tensor& g) {
          copy_in(bk, s, g);
          if (--bk.pending == 0) bk.work = dp.all_reduce(bk.flat, op);
          for (Bucket& o : buckets) o.work.test();  // drive MPI's progress on those in flight
        });
      }
  }
  Run run{mode};
  for (int64_t step = 0; step < kSteps; ++step) {
    const Tensor x = Tensor::randn({kBatch, kIn}, 100 + step), target = Tensor::randn({kBatch, kIn}, 200 + step);
    for (Bucket& bk : buckets) bk.pending = bk.params.size();
    const Tensor loss = loss_of(ps, narrow(x, 0, r * b, b), narrow(target, 0, r * b, b));  // my rows
    loss.backward();
    int collectives = 0;
    if (m == "naive") {
      for (Tensor& p : ps) {
        Tensor g = p.grad();
        dp.all_reduce(g, op).wait();
        ++collectives;
      }
    } else if (m == "bucketed") {
      for (Bucket& bk : buckets) {
        for (size_t s = 0; s < bk.params.size(); ++s) copy_in(bk, s, ps[bk.params[s]].grad());
        bk.work = dp.all_reduce(bk.flat, op);  // all started, then all waited for
        ++collectives;
      }
      for (Bucket& bk : buckets) bk.work.wait(), copy_out(bk, ps);
    } else {  // overlapped: the hooks started them during the backward
      for (Bucket& bk : buckets) {
        bk.work.wait();
        bk.work = comm::Work();  // done: an empty Work is a finished one, for the next step's polls
        copy_out(bk, ps);
        collectives += bk.pending == 0;
      }
    }
    const Tensor sloss = loss_of(serial, x, target);  // the serial run: the whole batch
    sloss.backward();
    double worst = 0;
    for (size_t i = 0; i < ps.size(); ++i) worst = std::fmax(worst, max_diff(ps[i].grad(), serial[i].grad()));
    ENGINE_CHECK(worst < 1e-5, mode, " ddp on rank ", r, ", step ", step,
                 ": a gradient differs from the serial run's by ", worst);
    example::sgd(ps, kLr);
    example::sgd(serial, kLr);
    run.collectives = collectives, run.loss = sloss.item(), run.worst = std::fmax(run.worst, worst);
  }
  return run;
}

int run(int argc, char** argv) {
  const comm::World& world = comm::init_world();
  const std::string bug =
      example::parse_break(argc, argv, "ddp", "usage: bash scripts/mpirun.sh -np P ./build/examples/ddp [--break BUG]",
                           {{"sum", "all-reduce the gradients' sum, not their average"},
                            {"no_hook", "overlapped: W1 gets no final-gradient hook, so its bucket never starts", 1}});
  ENGINE_USER_CHECK(kBatch % world.size == 0, "the batch of ", kBatch, " rows does not divide by ", world.size,
                    " ranks; run with -np 1, 2, 4 or 8");
  auto dp = comm::make_communicator(comm::Group::world_group(), kCPU, comm::Backend::mpi);
  std::vector<Run> runs;
  for (const char* mode : {"naive", "bucketed", "overlapped"}) runs.push_back(train(mode, *dp, bug));
  if (world.rank == 0) {
    std::printf("%d rank(s), %lld rows each, %lld steps per mode:\n", world.size, (long long)(kBatch / world.size),
                (long long)kSteps);
    for (const Run& r : runs)
      std::printf("  %-10s  %d all-reduce(s) a step  last loss %.6f  largest gradient difference %.1e\n", r.mode,
                  r.collectives, r.loss, r.worst);
    std::printf("ok: every mode equals the serial run\n");
  }
  comm::finalize_world();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return example::run_main("ddp", [&] { return run(argc, argv); });
}
