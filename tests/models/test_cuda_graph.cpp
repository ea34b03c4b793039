// CUDA graphs on the emu device (engine/graph.h, kernels/emu/graph.h): the
// emulator records a capture and replays it, as a GPU does, so CI checks
// what matters about a captured training step without a GPU:
//  - a GPT-2 step captured once and replayed (O3) trains exactly as the same
//    step run eagerly (O2): same losses, norms and final weights, bit for bit,
//    over steps with new batches and a changing lr (so inputs and AdamW's
//    per-step constants are really refreshed at every replay, not frozen at
//    capture);
//  - capture runs nothing, replay runs it again each time; a captured upload
//    sends its source's bytes as they are at each replay, through one copy
//    node and no host node;
//  - host work that cannot be captured (a synchronous copy) is an error
//    naming the copy, and the capture can be abandoned cleanly;
//  - memory allocated in a capture is never handed to tensors outside it;
//  - the weights' kept bf16 copies (engine/compute_copies.h, AdamW writing
//    them) train bit for bit as the per-forward casts, eager and captured,
//    and leave the forward without a cast.
#include <cstring>
#include <string>

#include "engine/compute_copies.h"
#include "engine/graph.h"
#include "engine/kernel_profile.h"
#include "engine/ops.h"
#include "kernels/rng.h"
#include "models/gpt2/gpt2.h"
#include "models/train/train_step.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;

namespace {
const Device kEmu{DeviceType::emu, 0};

Tensor host_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  std::vector<int32_t> v(size_t(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(rng::bits(seed, i) % uint64_t(V));
  return Tensor::from_ints(v, {B, T}, kCPU);
}

struct Run {
  std::vector<double> losses, norms;
  std::vector<std::vector<double>> params;
  std::vector<bool> replayed;
  int64_t opt_steps = 0;
};

// copies: the weights' kept bf16 copies; casts: the cast_storage launches
// of the third step (eager when use_graph is false).
Run train(bool use_graph, Recompute recompute, bool copies = false, int64_t* casts = nullptr) {
  GPT2Config c;
  c.vocab_size = 37, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 16;  // the head pads 37 to 64
  GPT2 model(c, 5, kEmu);
  AdamW opt(decay_groups(model.parameters(), 0.1), 1e-2, 0.9, 0.95);
  const int64_t B = 2, T = 11, accum = 2;
  ComputeCopies kept(model.parameters());
  if (copies) opt.set_compute_copies(&kept);
  // grad_clip 0.5 so that clipping really scales the gradients in some steps.
  const Autocast ac(Precision::O3, copies ? &kept : nullptr);
  GpuTrainStep step(
      model.parameters(), opt, accum, [&](const Tensor& x, const Tensor& y) { return model.loss(x, y, recompute, ac); },
      0.5, use_graph);
  Run r;
  for (int64_t s = 0; s < 4; ++s) {
    std::vector<Tensor> xs, ys;
    for (int64_t m = 0; m < accum; ++m) {
      xs.push_back(host_ids(B, T, c.vocab_size, uint64_t(100 * s + 2 * m)));
      ys.push_back(host_ids(B, T, c.vocab_size, uint64_t(100 * s + 2 * m + 1)));
    }
    KernelProfile prof(kEmu);
    if (s == 2 && casts) prof.start();
    const GpuTrainStep::Result res = step.run(
        [&](int64_t m) {
          return MicroBatch{xs[size_t(m)], ys[size_t(m)]};
        },
        1e-2 / double(s + 1));
    if (s == 2 && casts) {
      prof.stop();
      *casts = 0;
      for (const KernelCall& k : prof.calls()) *casts += k.name == "cast_storage";
    }
    r.losses.insert(r.losses.end(), res.losses.begin(), res.losses.end());
    r.norms.push_back(res.grad_norm);
    r.replayed.push_back(res.replayed);
  }
  for (const Tensor& p : model.parameters()) r.params.push_back(test::values(p.to(kCPU)));
  r.opt_steps = opt.steps();
  return r;
}
}  // namespace

TEST_CASE("cuda graph (emu): a captured GPT-2 step replays exactly like the eager step", "[emu][graph][gpt2]") {
  for (Recompute rc : {Recompute::no, Recompute::yes}) {
    const Run eager = train(false, rc), graph = train(true, rc);
    CHECK(graph.replayed == std::vector<bool>{false, true, true, true});
    CHECK(eager.replayed == std::vector<bool>{false, false, false, false});
    CHECK(graph.opt_steps == 4);
    CHECK(eager.losses == graph.losses);
    CHECK(eager.norms == graph.norms);
    REQUIRE(eager.params.size() == graph.params.size());
    for (size_t i = 0; i < eager.params.size(); ++i) CHECK(eager.params[i] == graph.params[i]);
    // The batches change every step, so the losses must too (a replay that
    // kept the captured inputs would repeat a loss).
    CHECK(graph.losses[2] != graph.losses[4]);
    CHECK(graph.norms[1] != graph.norms[2]);
  }
}

TEST_CASE("cuda graph (emu): the weights' kept bf16 copies train bit for bit as casting them, without forward casts",
          "[emu][graph][gpt2]") {
  int64_t casts = 0, casts_kept = 0;
  const Run cast = train(false, Recompute::no, false, &casts);
  const Run kept = train(false, Recompute::no, true, &casts_kept), kept_graph = train(true, Recompute::no, true);
  CHECK(kept_graph.replayed == std::vector<bool>{false, true, true, true});
  for (const Run* r : {&kept, &kept_graph}) {
    CHECK(r->losses == cast.losses);
    CHECK(r->norms == cast.norms);
    REQUIRE(r->params.size() == cast.params.size());
    for (size_t i = 0; i < cast.params.size(); ++i) CHECK(r->params[i] == cast.params[i]);
  }
  // The forward's casts of the weights are gone: every parameter but wpe's
  // (the embeddings gather from the fp32 tables; the tied head casts wte),
  // once per micro-batch (2). Their gradients' casts back remain, and so do
  // the activations' casts (the embeddings' sum).
  CHECK(casts > 0);
  CHECK(casts - casts_kept == 2 * (int64_t(cast.params.size()) - 1));
}

TEST_CASE("cuda graph (emu): capture runs nothing, every replay runs the work again", "[emu][graph]") {
  Tensor x = Tensor::full({5}, 1.0, DType::f32, kEmu);
  CudaGraph g(kEmu);
  g.capture_begin();
  CHECK(capturing());
  scale_(x, 2.0);  // recorded, not run
  g.capture_end();
  CHECK_FALSE(capturing());
  CHECK(test::values(x.to(kCPU)) == std::vector<double>(5, 1.0));
  g.replay();
  CHECK(test::values(x.to(kCPU)) == std::vector<double>(5, 2.0));
  g.replay();
  CHECK(test::values(x.to(kCPU)) == std::vector<double>(5, 4.0));
}

TEST_CASE("cuda graph (emu): a captured upload sends its bytes as they are at each replay, without a host node",
          "[emu][graph]") {
  auto src = std::make_shared<std::vector<uint8_t>>(2 * sizeof(float));
  const auto put = [&](float a, float b) {
    std::memcpy(src->data(), &a, sizeof a);
    std::memcpy(src->data() + sizeof a, &b, sizeof b);
  };
  put(1, 2);
  Tensor x = Tensor::full({2}, 0.0, DType::f32, kEmu);
  CudaGraph g(kEmu);
  KernelProfile prof(kEmu);
  prof.start();
  g.capture_begin();
  upload(kEmu, src, x.data_ptr());
  g.capture_end();
  prof.stop();
  std::vector<std::string> names;
  for (const KernelCall& k : prof.calls()) names.push_back(k.name);
  CHECK(names == std::vector<std::string>{"memcpy host to device"});
  CHECK(test::values(x.to(kCPU)) == std::vector<double>{0, 0});  // capture ran nothing
  put(3, 4);
  g.replay();
  CHECK(test::values(x.to(kCPU)) == std::vector<double>{3, 4});
  put(5, 6);
  g.replay();
  CHECK(test::values(x.to(kCPU)) == std::vector<double>{5, 6});
  // Eager, the bytes are read in stream order: a host task, then the copy.
  put(7, 8);
  upload(kEmu, src, x.data_ptr());
  CHECK(test::values(x.to(kCPU)) == std::vector<double>{7, 8});
}

TEST_CASE("cuda graph (emu): host reads inside a capture are errors; the capture can be abandoned", "[emu][graph]") {
  Tensor x = Tensor::full({1}, 1.0, DType::f32, kEmu);
  CudaGraph g(kEmu);
  g.capture_begin();
  CHECK_THROWS_WITH(x.item(), Catch::Contains("during CUDA graph capture") && Catch::Contains("emu -> cpu"));
  // Host-side fills and conversions of emu memory would run once, at capture.
  CHECK_THROWS_WITH(Tensor::zeros({4}, DType::i32, kEmu), Catch::Contains("during CUDA graph capture"));
  CHECK_THROWS_WITH(x.to(DType::f64), Catch::Contains("host-side conversion"));
  g.capture_abort();
  CHECK_FALSE(capturing());
  CHECK(x.to(kCPU).item() == 1.f);  // eager work runs again
  CHECK_THROWS_WITH(g.replay(), Catch::Contains("before capture_end"));
}

TEST_CASE("cuda graph (emu): blocks allocated in a capture stay in the graph's pool", "[emu][graph]") {
  CudaGraph g(kEmu);
  void* in_graph = nullptr;
  g.capture_begin();
  {
    Tensor t = Tensor::empty({4096}, DType::f32, kEmu);  // freed inside the capture
    in_graph = t.data_ptr();
  }
  g.capture_end();
  // An eager tensor of the same size must not get the graph's block.
  Tensor u = Tensor::empty({4096}, DType::f32, kEmu);
  CHECK(u.data_ptr() != in_graph);
}

// Device batches as the data loader gives them: a ring of two device
// buffers rewritten in place, micro-batch k in buffer k % 2, with 3
// micro-batches per step (so a step reuses a buffer within itself). Eagerly
// the step reads them where they lie; the graph copies each into its own
// inputs. Both must train exactly as from host batches: a replay that kept
// the captured inputs, or a buffer read after it was rewritten, would differ.
TEST_CASE("cuda graph (emu): device batches from a reused ring train as host batches do", "[emu][graph]") {
  GPT2Config c;
  c.vocab_size = 37, c.block_size = 16, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
  const Autocast ac(Precision::O3);
  const int64_t B = 2, T = 5, accum = 3, steps = 4;
  auto batch = [&](int64_t k) {
    return MicroBatch{host_ids(B, T, c.vocab_size, uint64_t(2 * k)), host_ids(B, T, c.vocab_size, uint64_t(2 * k + 1))};
  };
  auto losses = [&](bool use_graph, bool ring) {
    GPT2 model(c, 5, kEmu);
    AdamW opt(decay_groups(model.parameters(), 0.1), 1e-2);
    GpuTrainStep step(
        model.parameters(), opt, accum,
        [&](const Tensor& x, const Tensor& y) { return model.loss(x, y, Recompute::no, ac); }, 1.0, use_graph);
    MicroBatch buf[2] = {{Tensor::empty({B, T}, DType::i32, kEmu), Tensor::empty({B, T}, DType::i32, kEmu)},
                         {Tensor::empty({B, T}, DType::i32, kEmu), Tensor::empty({B, T}, DType::i32, kEmu)}};
    std::vector<double> out;
    for (int64_t s = 0; s < steps; ++s) {
      const GpuTrainStep::Result r = step.run(
          [&](int64_t m) {
            const int64_t k = s * accum + m;
            if (!ring) return batch(k);
            MicroBatch& d = buf[k % 2];
            d.x.copy_from(batch(k).x);
            d.y.copy_from(batch(k).y);
            return d;
          },
          1e-2);
      CHECK(r.replayed == (use_graph && s >= 1));
      out.insert(out.end(), r.losses.begin(), r.losses.end());
    }
    if (use_graph) {
      const Tensor longer = Tensor::from_ints({1, 2, 3, 4, 5, 6}, {1, 6});
      CHECK_THROWS_WITH(step.run(
                            [&](int64_t) {
                              return MicroBatch{longer, longer};
                            },
                            1e-2),
                        Catch::Contains("micro-batch 0 is i32(1, 6)"));
    }
    return out;
  };
  const std::vector<double> host = losses(false, false);
  CHECK(losses(false, true) == host);
  CHECK(losses(true, true) == host);
  CHECK(losses(true, false) == host);
  CHECK(host[3] != host[6]);
}
