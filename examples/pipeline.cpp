// pipeline: pipeline parallelism in one page. An MLP of 8 layers is cut into
// P stages, one a rank; the batch into m micro-batches. A stage runs the
// forward of a micro-batch on what the stage before sent it and sends its
// output on; backwards come back the other way. Two orders of the same work:
//   afab  all forwards, then all backwards (GPipe): m micro-batches'
//         activations held at once;
//   1f1b  a warm-up of P - stage - 1 forwards, then one forward and one
//         backward in turn, then the backwards left (PipeDream-Flush,
//         Megatron-LM's default): at most P - stage held.
// Both leave the same idle time, the bubble: (P - 1) / (m + P - 1) of the
// step. Rank 0 prints each schedule as a timeline (a forward takes one time
// unit, a backward two) and its bubble against that formula. Every rank also
// runs the serial model on the whole batch and checks its stage's gradients.
//   bash scripts/mpirun.sh -np 4 ./build/examples/pipeline      (-np 1, 2, 4 or 8)
// At full strength: comm/pipeline_schedule.cpp (the schedules, and the
// messages batched so that no two neighbours wait on each other's send) and
// models/train/pipeline_step.cpp (GPT-2, the Llama and the ViT in stages,
// with tp, dp and ZeRO), run by models/train/train.cpp under --pp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/group.h"
#include "examples/example_util.h"

using namespace eng;
using example::max_diff;
using example::param;

namespace {
constexpr int64_t kLayers = 8, kWidth = 24, kBatch = 32, kMicro = 4;

struct Op {
  bool forward;
  int64_t micro;
};

std::vector<Op> schedule(const std::string& name, int P, int stage) {
  std::vector<Op> ops;
  if (name == "afab") {
    for (int64_t j = 0; j < kMicro; ++j) ops.push_back({true, j});
    for (int64_t j = 0; j < kMicro; ++j) ops.push_back({false, j});
    return ops;
  }
  const int64_t warmup = std::min<int64_t>(P - stage - 1, kMicro);
  int64_t f = 0, b = 0;
  while (f < warmup) ops.push_back({true, f++});
  while (f < kMicro) ops.push_back({true, f++}), ops.push_back({false, b++});
  while (b < kMicro) ops.push_back({false, b++});
  return ops;
}

// The timeline of every stage, with a forward one unit and a backward two:
// an op starts when its stage is free and its input is there (the forward
// of the stage before, the backward of the stage after). Returns the idle fraction.
double print_timeline(const std::string& name, int P) {
  std::vector<std::vector<int64_t>> f_end(P, std::vector<int64_t>(kMicro, -1)), b_end = f_end;
  std::vector<std::string> rows(P);
  std::vector<std::vector<Op>> ops(P);
  std::vector<size_t> next(P, 0);
  for (int s = 0; s < P; ++s) ops[s] = schedule(name, P, s);
  // Stages advance in turn whenever their next op's input is ready.
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < P; ++s) {
      if (next[s] == ops[s].size()) continue;
      const Op op = ops[s][next[s]];
      int64_t ready;
      if (op.forward)
        ready = s == 0 ? 0 : f_end[s - 1][op.micro];
      else
        ready = s == P - 1 ? f_end[s][op.micro] : b_end[s + 1][op.micro];
      if (ready < 0) continue;  // not computed yet
      const int64_t start = std::max<int64_t>(ready, int64_t(rows[s].size()));
      rows[s].resize(size_t(start), '.');
      rows[s] += op.forward ? std::string(1, char('0' + op.micro)) : std::string(2, char('a' + op.micro));
      (op.forward ? f_end : b_end)[s][op.micro] = int64_t(rows[s].size());
      ++next[s], moved = true;
    }
  }
  size_t span = 0, idle = 0;
  for (const std::string& r : rows) span = std::max(span, r.size());
  std::printf("%s (forwards 0-%lld, backwards a-%c, idle .):\n", name.c_str(), (long long)kMicro - 1,
              char('a' + kMicro - 1));
  for (int s = 0; s < P; ++s) {
    rows[s].resize(span, '.');
    idle += size_t(std::count(rows[s].begin(), rows[s].end(), '.'));
    std::printf("  stage %d  %s\n", s, rows[s].c_str());
  }
  return double(idle) / double(span * size_t(P));
}

// Layers [first, first + n) of the chain: h = gelu(h W^T + b).
Tensor run_layers(const std::vector<Tensor>& p, int64_t first, int64_t n, Tensor h) {
  for (int64_t l = first; l < first + n; ++l) h = gelu(linear(h, p[2 * l], p[2 * l + 1]));
  return h;
}

int run(int argc, char** argv) {
  const comm::World& world = comm::init_world();
  const std::string bug = example::parse_break(
      argc, argv, "pipeline", "usage: bash scripts/mpirun.sh -np P ./build/examples/pipeline [--break BUG]",
      {{"no_loss_scale", "the last stage back-propagates each micro-batch's loss without the 1/m", 1},
       {"lifo",
        "a backward takes the newest saved activations, not its own micro-batch's (afab then runs "
        "its backwards in reverse on every stage alike and stays right; 1f1b does not)"}});
  const int P = world.size, s = world.rank;
  ENGINE_USER_CHECK(kLayers % P == 0, "the ", kLayers, " layers do not divide by ", P,
                    " stages; run with -np 1, 2, 4 or 8");
  auto pp = comm::make_communicator(comm::Group::world_group(), kCPU, comm::Backend::mpi);
  const int64_t per = kLayers / P, first = s * per, rows = kBatch / kMicro;

  std::vector<Tensor> init, serial;
  for (int64_t l = 0; l < kLayers; ++l) {
    init.push_back(Tensor::randn({kWidth, kWidth}, 10 + l, 0.35f));
    init.push_back(Tensor::randn({kWidth}, 50 + l, 0.1f));
  }
  for (const Tensor& t : init) serial.push_back(param(t));
  const Tensor x = Tensor::randn({kBatch, kWidth}, 1), target = Tensor::randn({kBatch, kWidth}, 2);
  // The serial model: the whole batch, the mean loss over it.
  mse_loss(run_layers(serial, 0, kLayers, x), target).backward();

  for (const std::string name : {"afab", "1f1b"}) {
    std::vector<Tensor> mine;  // my stage's layers only; the others' stay zero-sized here
    for (size_t i = 0; i < init.size(); ++i)
      mine.push_back(int64_t(i / 2) >= first && int64_t(i / 2) < first + per ? param(init[i]) : Tensor());
    // Per micro-batch: my input (a leaf whose gradient goes back) and my output.
    std::vector<Tensor> in(kMicro), out(kMicro);
    // Sends pending until the step's end (why: below). A Work holds no
    // tensor, so `sent` keeps each sent buffer alive until its send is done.
    std::vector<Tensor> sent;
    std::vector<comm::Work> sends;
    std::vector<int64_t> saved;  // micro-batches whose forward ran and backward not yet
    size_t peak = 0;
    for (const Op& op : schedule(name, P, s)) {
      const int64_t j = op.forward || bug != "lifo" ? op.micro : saved.back();
      if (op.forward) {
        Tensor h = narrow(x, 0, j * rows, rows);
        if (s > 0) {
          h = Tensor::empty({rows, kWidth});
          pp->recv(h, s - 1).wait();
        }
        // The graph is cut at the stage boundary: my input is a leaf, so my
        // backward stops here and leaves its gradient for the stage before.
        in[j] = h.detach().set_requires_grad(s > 0);
        out[j] = run_layers(mine, first, per, in[j]);
        if (s == P - 1) {  // the loss: the batch's mean is the mean of the m micro-batch means
          const Tensor loss = mse_loss(out[j], narrow(target, 0, j * rows, rows));
          out[j] = bug == "no_loss_scale" ? loss : scale(loss, 1.0 / double(kMicro));
        } else {
          // A send is left pending, not waited for at once: in 1f1b's steady
          // state two neighbours each send before they receive, and a send
          // that waited for its receiver would then wait forever.
          sent.push_back(out[j].detach());
          sends.push_back(pp->send(sent.back(), s + 1));
        }
        saved.push_back(j), peak = std::max(peak, saved.size());
      } else {
        if (s == P - 1) {
          out[j].backward();
        } else {
          Tensor g = Tensor::empty({rows, kWidth});
          pp->recv(g, s + 1).wait();
          out[j].backward(g);
        }
        if (s > 0) sent.push_back(in[j].grad()), sends.push_back(pp->send(sent.back(), s - 1));
        saved.erase(std::find(saved.begin(), saved.end(), j));
        in[j] = out[j] = Tensor();  // the activations are freed
      }
    }
    for (comm::Work& w : sends) w.wait();
    double worst = 0;
    for (int64_t i = 2 * first; i < 2 * (first + per); ++i)
      worst = std::fmax(worst, max_diff(mine[size_t(i)].grad(), serial[size_t(i)].grad()));
    ENGINE_CHECK(worst < 1e-5, name, " stage ", s, ": a gradient differs from the serial run's by ", worst);
    // Every stage's peak, to every rank (one float each, summed from zeros).
    Tensor peaks = Tensor::zeros({P});
    peaks.data<float>()[s] = float(peak);
    pp->all_reduce(peaks, comm::ReduceOp::sum).wait();
    // afab holds all m; 1f1b at most P - stage (the warm-up's forwards and one more).
    const std::vector<float> held = peaks.to_vector();
    for (int t = 0; t < P; ++t)
      ENGINE_CHECK(held[size_t(t)] == float(name == "afab" ? kMicro : std::min<int64_t>(P - t, kMicro)), name,
                   " stage ", t, " held ", held[size_t(t)], " micro-batches at its peak");
    if (s == 0) {
      const double bubble = print_timeline(name, P);
      ENGINE_CHECK(std::fabs(bubble - double(P - 1) / double(kMicro + P - 1)) < 1e-12, name, "'s timeline idles ",
                   bubble, " of the step, not (P - 1) / (m + P - 1)");
      std::printf("  bubble %.3f, (P - 1) / (m + P - 1) = %.3f; micro-batches held at the peak, by stage:", bubble,
                  double(P - 1) / double(kMicro + P - 1));
      for (float v : held) std::printf(" %.0f", v);
      std::printf("\n  gradients equal the serial run's (largest difference on stage 0 %.1e)\n", worst);
    }
  }
  if (s == 0) std::printf("ok: %d stage(s) of %lld layers, %lld micro-batches\n", P, (long long)per, (long long)kMicro);
  comm::finalize_world();
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return example::run_main("pipeline", [&] { return run(argc, argv); });
}
