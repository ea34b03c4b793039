// The ViT's training path below the train program: the data loader feeding
// GpuTrainStep with 3 micro-batches per step (so the loader's two device
// buffers are reused within a step), eagerly and as a captured graph, against
// the same steps on the cpu. On emu (CI) the copy stream runs in order, so
// this checks the plumbing: which buffer each micro-step reads, the graph's
// copies into its own inputs. On a real GPU ([gpu]) the copies overlap the
// compute, and the same comparison checks the events that order them.
#include <cmath>

#include "engine/autograd.h"
#include "engine/device.h"
#include "engine/ops.h"
#include "engine/optim/optimizer.h"
#include "io/loader.h"
#include "models/train/train_step.h"
#include "models/vit/vit.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;

namespace {

// Images whose class (index mod 3) shows in their pixels, with noise: a
// little to learn, computed from the index.
class Shapes : public SampleDataset {
 public:
  int64_t size() const override { return 40; }
  std::vector<int64_t> input_shape() const override { return {2, 8, 8}; }
  std::vector<int64_t> target_shape() const override { return {}; }
  DType target_dtype() const override { return DType::i32; }
  void read(int64_t index, float* x, void* y) const override {
    const int label = int(index % 3);
    for (int k = 0; k < 128; ++k)
      x[k] = float(std::sin(0.37 * double(k * (label + 1)) + 0.11 * double(index)) + (k % 8 == label ? 1.0 : 0.0));
    *static_cast<int32_t*>(y) = label;
  }
  int64_t bytes_per_sample() const override { return 2 * 8 * 8 * 4 + 4; }
  std::string describe() const override { return "shapes"; }
};

ViTConfig config() {
  ViTConfig c;
  c.in_channels = 2, c.img_h = 8, c.img_w = 8, c.patch = 4, c.embed = 16, c.depth = 1, c.heads = 2;
  c.head = ViTHead::classify, c.classes = 3;
  return c;
}

constexpr int64_t kAccum = 3, kMicro = 2, kSteps = 5;

// kSteps optimizer steps of kAccum micro-batches from the loader; the losses.
std::vector<double> train(Device dev, bool use_graph) {
  const Shapes data;
  const EpochSampler sampler(data.size(), kMicro, kAccum, 11, Shuffle::yes);  // 6 steps per epoch
  Loader loader(data, sampler, 0, kAccum, dev, LoaderOptions{2, 3});
  ViT model(config(), 5, dev);
  AdamW opt(decay_groups(model.parameters(), 0.05), 3e-3, 0.9, 0.95);
  const double clip = 0.5;
  std::vector<double> losses;
  if (dev.type == DeviceType::cpu) {
    for (int64_t s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      for (int64_t m = 0; m < kAccum; ++m) {
        const Batch b = loader.next();
        Tensor loss = model.loss(b.x, b.y);
        losses.push_back(loss.item());
        scale(loss, 1.0 / double(kAccum)).backward();
      }
      clip_grad_norm(model.parameters(), clip);
      opt.step();
    }
    return losses;
  }
  GpuTrainStep step(
      model.parameters(), opt, kAccum, [&](const Tensor& x, const Tensor& y) { return model.loss(x, y); }, clip,
      use_graph);
  for (int64_t s = 0; s < kSteps; ++s) {
    const GpuTrainStep::Result r = step.run(
        [&](int64_t m) {
          const Batch b = loader.next();
          REQUIRE(b.pos.micro == m);
          return MicroBatch{b.x, b.y};
        },
        3e-3);
    CHECK(r.replayed == (use_graph && s >= 1));
    losses.insert(losses.end(), r.losses.begin(), r.losses.end());
  }
  return losses;
}

// Tolerance: the GPU kernels sum in other orders than the cpu's (1e-4
// relative, as the ViT's emu-vs-cpu test); five AdamW steps keep it there.
void check_against_cpu(Device dev) {
  const std::vector<double> cpu = train(kCPU, false);
  for (bool graph : {false, true}) {
    INFO((graph ? "graph" : "eager") << " on " << dev.str());
    const std::vector<double> got = train(dev, graph);
    REQUIRE(got.size() == cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) CHECK(got[i] == Approx(cpu[i]).epsilon(1e-4));
  }
  // It learns, so the comparison follows weights that move: the last step's
  // mean loss is below the first's.
  CHECK(cpu[12] + cpu[13] + cpu[14] < cpu[0] + cpu[1] + cpu[2]);
}

}  // namespace

TEST_CASE("vit training (emu): the loader feeding the GPU step, eager and graph, matches the cpu",
          "[emu][vit][loader]") {
  check_against_cpu(Device{DeviceType::emu, 0});
}

TEST_CASE("vit training (cuda): the loader feeding the GPU step, eager and graph, matches the cpu", "[gpu]") {
  if (!cuda_available()) {
    WARN("skipped: no CUDA device answers");
    return;
  }
  check_against_cpu(Device{DeviceType::cuda, 0});
}
