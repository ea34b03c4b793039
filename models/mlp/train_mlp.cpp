// train_mlp: the engine's first main job. Trains a 2-layer MLP (Linear-GELU-
// Linear) on the spirals classification problem with AdamW, a warmup+cosine
// schedule and gradient clipping, printing the loss as it falls and the final
// accuracy. Full-batch or minibatch; every option is in --help.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/schedule.h"
#include "kernels/rng.h"
#include "models/mlp/spirals.h"

using namespace eng;

namespace {

struct Options {
  int64_t steps = 2000;
  int64_t hidden = 128;
  int64_t batch = 256;
  int64_t points = 1000;  // per class
  int classes = 3;
  double lr = 1e-2;
  double weight_decay = 1e-4;
  double clip = 1.0;
  int64_t warmup = 100;
  int64_t log_every = 100;
  uint64_t seed = 1337;
  std::string device = "auto";
};

void print_help(const Options& o) {
  std::printf(
      "usage: train_mlp [options]\n"
      "Trains a 2-layer MLP on the spirals problem (one class per spiral arm).\n"
      "  --steps N         optimizer steps (default %lld)\n"
      "  --hidden N        hidden width (default %lld)\n"
      "  --batch N         minibatch size, 0 = full batch (default %lld)\n"
      "  --points N        points per class (default %lld)\n"
      "  --classes N       number of spiral arms (default %d)\n"
      "  --lr X            peak learning rate (default %g)\n"
      "  --weight-decay X  AdamW weight decay on matrices (default %g)\n"
      "  --clip X          global gradient-norm clip, 0 = off (default %g)\n"
      "  --warmup N        linear warmup steps before cosine decay (default %lld)\n"
      "  --log-every N     print the loss every N steps (default %lld)\n"
      "  --seed N          seed for data, init and batches (default %llu)\n"
      "  --device D        auto | cpu | cuda | emu (default %s)\n"
      "  --help            this text\n",
      (long long)o.steps, (long long)o.hidden, (long long)o.batch, (long long)o.points, o.classes, o.lr, o.weight_decay,
      o.clip, (long long)o.warmup, (long long)o.log_every, (unsigned long long)o.seed, o.device.c_str());
}

double parse_num(const char* flag, const char* v) {
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  ENGINE_CHECK(end && *end == '\0' && end != v, "option ", flag, ": '", v, "' is not a number");
  return d;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help(o);
      std::exit(0);
    }
    ENGINE_CHECK(i + 1 < argc, "option ", a, " needs a value (see --help)");
    const char* v = argv[++i];
    if (a == "--steps")
      o.steps = int64_t(parse_num(argv[i - 1], v));
    else if (a == "--hidden")
      o.hidden = int64_t(parse_num(argv[i - 1], v));
    else if (a == "--batch")
      o.batch = int64_t(parse_num(argv[i - 1], v));
    else if (a == "--points")
      o.points = int64_t(parse_num(argv[i - 1], v));
    else if (a == "--classes")
      o.classes = int(parse_num(argv[i - 1], v));
    else if (a == "--lr")
      o.lr = parse_num(argv[i - 1], v);
    else if (a == "--weight-decay")
      o.weight_decay = parse_num(argv[i - 1], v);
    else if (a == "--clip")
      o.clip = parse_num(argv[i - 1], v);
    else if (a == "--warmup")
      o.warmup = int64_t(parse_num(argv[i - 1], v));
    else if (a == "--log-every")
      o.log_every = int64_t(parse_num(argv[i - 1], v));
    else if (a == "--seed")
      o.seed = uint64_t(parse_num(argv[i - 1], v));
    else if (a == "--device")
      o.device = v;
    else
      ENGINE_FAIL("unknown option '", a, "' (see --help)");
  }
  ENGINE_CHECK(o.steps > 0 && o.hidden > 0 && o.points > 0 && o.classes >= 2 && o.batch >= 0 && o.warmup >= 0 &&
                   o.warmup <= o.steps && o.log_every > 0,
               "options out of range: need steps, hidden, points, log-every > 0, classes >= 2, 0 <= warmup <= steps");
  return o;
}

// Picks rows of x/y for one minibatch with a seeded counter-based draw.
void gather_batch(const models::Spirals& d, int64_t batch, uint64_t seed, int64_t step, Tensor& xb, Tensor& yb) {
  const int64_t n = d.y.numel();
  const float* x = d.x.data<float>();
  const int32_t* y = d.y.data<int32_t>();
  float* xo = xb.data<float>();
  int32_t* yo = yb.data<int32_t>();
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t k = int64_t(rng::bits(seed, uint64_t(step * batch + i)) % uint64_t(n));
    xo[2 * i] = x[2 * k];
    xo[2 * i + 1] = x[2 * k + 1];
    yo[i] = y[k];
  }
}

double accuracy(const MLP& mlp, const models::Spirals& d) {
  NoGradGuard ng;
  const std::vector<float> logits = mlp.forward(d.x.to(mlp.fc1->weight.device())).to_vector();
  const int32_t* y = d.y.data<int32_t>();
  const int64_t n = d.y.numel(), C = int64_t(logits.size()) / n;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (logits[size_t(i * C + c)] > logits[size_t(i * C + best)]) best = c;
    correct += best == y[i];
  }
  return double(correct) / double(n);
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const Device dev = Device::parse(o.device);  // every MLP op has cpu and CUDA (emu) kernels
  const models::Spirals data = models::make_spirals(o.points, o.classes, 0.2f, o.seed);
  const int64_t n = data.y.numel();
  const int64_t batch = o.batch == 0 || o.batch > n ? n : o.batch;
  MLP mlp(2, o.hidden, o.classes, Activation::gelu, InitOptions{o.seed, DType::f32, dev, 0.f});
  AdamW opt(decay_groups(mlp.parameters(), o.weight_decay), o.lr);
  WarmupCosineLR sched(o.lr, o.lr * 0.1, o.warmup, o.steps);
  std::printf("train_mlp: %lld points, %d classes, MLP 2-%lld-%d (%lld params), batch %lld, %lld steps on %s\n",
              (long long)n, o.classes, (long long)o.hidden, o.classes, (long long)mlp.num_parameters(),
              (long long)batch, (long long)o.steps, dev.str().c_str());
  Tensor xb = Tensor::empty({batch, 2}), yb = Tensor::empty({batch}, DType::i32);
  const auto t0 = std::chrono::steady_clock::now();
  double first_loss = 0, loss_avg = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    gather_batch(data, batch, o.seed + 1, step, xb, yb);
    opt.set_lr(sched.lr_at(step));
    Tensor loss = cross_entropy(mlp.forward(xb.to(dev)), yb.to(dev));
    opt.zero_grad();
    loss.backward();
    const double norm = clip_grad_norm(mlp.parameters(), o.clip);
    opt.step();
    const double l = loss.item();
    ENGINE_CHECK(std::isfinite(l), "loss became ", l, " at step ", step, " (lr too high?)");
    if (step == 0) first_loss = l;
    loss_avg += l;
    if ((step + 1) % o.log_every == 0 || step == 0) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const int64_t k = step == 0 ? 1 : o.log_every;
      std::printf("step %5lld/%lld  loss %.4f  lr %.2e  grad_norm %.3f  %.0f steps/s\n", (long long)step + 1,
                  (long long)o.steps, loss_avg / double(k), opt.lr(), norm, double(step + 1) / secs);
      std::fflush(stdout);
      loss_avg = 0;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double acc = accuracy(mlp, data);
  std::printf("done in %.1f s: first loss %.4f (ln %d = %.4f), train accuracy %.1f%%\n", secs, first_loss, o.classes,
              std::log(double(o.classes)), 100.0 * acc);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp: error: %s\n", e.what());
    return 1;
  }
}
