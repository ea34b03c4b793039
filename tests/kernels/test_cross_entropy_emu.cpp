// kernels/cuda/cross_entropy.cu (the fused classifier) under the emulator
// against the cpu reference: the mean loss and dlogits in f32, bf16 and f16 on
// awkward sizes (N = 1, 5, 37 rows, more than the emulator's 4-block grid
// holds in one pass; V = 1, 3, 37, 300 and 40, which takes the 16-byte path in
// every dtype; 4100 rows, two turns of the count's and mean's block), ignored
// targets including all of them, an incoming gradient
// other than 1, inference without dlogits, and an unaligned view.
// Tolerances: emu_check.h's per dtype. The loss is reduced in fp32 and the mean
// in double on both sides; the emu loss is fp32 whatever the logits' dtype.
// The seed a training step announces (ExpectedSeed) is folded into the
// forward's dlogits, and the backward from that seed rescales nothing.
// A padded vocabulary (cross_entropy_padded: V classes in rows of W) equals
// the loss on the first V columns, with dlogits 0 in the padding. The
// kernel's three forms (gpu::CrossEntropyForm: the next row prefetched, the
// default where two rows fit in shared memory; one row cached; the row read
// twice) each pass the reference checks, and a row too long for the first
// two falls to the third. A bad ENGINE_CROSS_ENTROPY is a one-line error.
#include <cmath>
#include <cstdlib>
#include <vector>

#include "engine/autograd.h"
#include "engine/kernel_profile.h"
#include "engine/ops.h"
#include "kernels/cuda/cross_entropy.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
constexpr int32_t kIgnore = -100;

// The fused kernel's form while in scope, the one before after.
struct Form {
  explicit Form(gpu::CrossEntropyForm f) : before(gpu::cross_entropy_form()) { gpu::set_cross_entropy_form(f); }
  ~Form() { gpu::set_cross_entropy_form(before); }
  gpu::CrossEntropyForm before;
};
constexpr gpu::CrossEntropyForm kForms[] = {gpu::CrossEntropyForm::prefetch, gpu::CrossEntropyForm::cached,
                                            gpu::CrossEntropyForm::twice};
const char* form_name(gpu::CrossEntropyForm f) {
  return f == gpu::CrossEntropyForm::prefetch ? "prefetch" : f == gpu::CrossEntropyForm::cached ? "cached" : "twice";
}

// Targets in [0, V), every `ignore_every`-th row (from row 1) ignored; 0 = none.
Tensor make_targets(int64_t N, int64_t V, int ignore_every, Device dev) {
  std::vector<int32_t> t(size_t(N), 0);
  for (int64_t r = 0; r < N; ++r) {
    t[size_t(r)] = int32_t((r * 7 + 3) % V);
    if (ignore_every && r % ignore_every == 1) t[size_t(r)] = kIgnore;
  }
  return Tensor::from_ints(t, {N}, dev);
}

// Runs the loss on the cpu (f32, rounded inputs) and on emu (dtype t) with
// the incoming gradient g, and compares the loss and dlogits.
void check_against_cpu(const Tensor& logits, DType t, int ignore_every, double g) {
  const int64_t N = logits.size(0), V = logits.size(1);
  Tensor xr = rounded(logits, t).set_requires_grad(true);
  Tensor ref = cross_entropy(xr, make_targets(N, V, ignore_every, kCPU), kIgnore);
  ref.backward(Tensor::full({}, g, DType::f32));
  Tensor xe = on_emu(logits, t).set_requires_grad(true);
  Tensor out = cross_entropy(xe, make_targets(N, V, ignore_every, kEmu), kIgnore);
  CHECK(out.device() == kEmu);
  CHECK(out.dtype() == DType::f32);
  out.backward(Tensor::full({}, g, DType::f32, kEmu));
  CHECK_EMU_CLOSE(out, ref, t);
  CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
}
}  // namespace

// N = 37 rows on the emulator's 4 blocks: the prefetching form's blocks take
// 9 or 10 rows each, its two buffers in turn, ignored rows among them.
TEST_CASE("emu cross_entropy: loss and dlogits match the cpu reference", "[emu][kernels]") {
  for (gpu::CrossEntropyForm f : kForms) {
    const Form form(f);
    for (DType t : {DType::f32, DType::bf16, DType::f16})
      for (int64_t N : {1, 5, 37})
        for (int64_t V : {1, 3, 37, 40, 300}) {
          INFO(form_name(f) << " " << dtype_name(t) << " N = " << N << " V = " << V);
          const Tensor x = Tensor::randn({N, V}, uint64_t(N * 1000 + V), 2.f);
          check_against_cpu(x, t, N > 1 ? 4 : 0, 1.0);
        }
  }
}

// The valid rows' count and the mean loss are one block of 1024 threads,
// each loading 4 rows before it adds them: 4100 rows (a third ignored) take
// two turns of that block, the second with 4 rows (threads 0-3's first).
TEST_CASE("emu cross_entropy: the count and the mean over more rows than one turn of their block", "[emu][kernels]") {
  check_against_cpu(Tensor::randn({4100, 3}, 4100, 2.f), DType::f32, 3, 1.0);
}

// Two rows fit the emulator's 227 KiB (an sm_90's) up to 113 KiB a row, one
// cached row up to 104 KiB; a longer row is read twice from global memory.
// V = 27000 in f32 (108 KB) is prefetched, too long to cache alone; in bf16
// (54 KB) it fits both; V = 30000 in f32 (120 KB) fits neither.
TEST_CASE("emu cross_entropy: a row too long for shared memory is read twice, with the same result", "[emu][kernels]") {
  for (gpu::CrossEntropyForm f : kForms) {
    const Form form(f);
    for (DType t : {DType::f32, DType::bf16})
      for (int64_t V : {27000, 30000}) {
        INFO(form_name(f) << " " << dtype_name(t) << " V = " << V);
        const Tensor x = Tensor::randn({3, V}, 77, 2.f);
        check_against_cpu(x, t, 0, 1.0);
      }
  }
}

TEST_CASE("emu cross_entropy: a bad ENGINE_CROSS_ENTROPY is a one-line error", "[emu][kernels]") {
  const Tensor x = Tensor::randn({3, 40}, 1).to(kEmu);
  ::setenv("ENGINE_CROSS_ENTROPY", "fast", 1);
  gpu::g_cross_entropy_form.store(-1);  // read the variable again
  CHECK_THROWS_WITH(cross_entropy(x, Tensor::from_ints({0, 5, 1}, {3}, kEmu)),
                    Catch::Contains("ENGINE_CROSS_ENTROPY 'fast' is not a form") &&
                        Catch::Contains("use auto, prefetch, cached or twice"));
  ::setenv("ENGINE_CROSS_ENTROPY", "cached", 1);
  gpu::g_cross_entropy_form.store(-1);
  CHECK(gpu::cross_entropy_form() == gpu::CrossEntropyForm::cached);
  ::unsetenv("ENGINE_CROSS_ENTROPY");
  gpu::set_cross_entropy_form(gpu::CrossEntropyForm::automatic);
}

TEST_CASE("emu cross_entropy: an incoming gradient other than 1 rescales dlogits", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16}) {
    INFO(dtype_name(t));
    check_against_cpu(Tensor::randn({5, 37}, 11, 2.f), t, 3, 2.5);
  }
}

TEST_CASE("emu cross_entropy: all targets ignored give loss 0 and zero dlogits", "[emu][kernels]") {
  for (DType t : {DType::f32, DType::bf16}) {
    Tensor x = on_emu(Tensor::randn({5, 37}, 3), t).set_requires_grad(true);
    Tensor loss = cross_entropy(x, Tensor::from_ints(std::vector<int32_t>(5, kIgnore), {5}, kEmu), kIgnore);
    loss.backward();
    CHECK(loss.item() == 0.f);
    for (double v : values(x.grad())) CHECK(v == 0.0);
  }
}

TEST_CASE("emu cross_entropy: inference skips dlogits, loss unchanged", "[emu][kernels]") {
  const Tensor x = Tensor::randn({37, 40}, 5, 2.f);
  const Tensor ref = cross_entropy(x, make_targets(37, 40, 4, kCPU), kIgnore);
  NoGradGuard no_grad;
  const Tensor out = cross_entropy(x.to(kEmu), make_targets(37, 40, 4, kEmu), kIgnore);
  CHECK_EMU_CLOSE(out, ref, DType::f32);
}

TEST_CASE("emu cross_entropy: unaligned views take the scalar path", "[emu][kernels]") {
  // Row 1 starts 12 bytes in. (With V % pack == 0 every row slice is aligned,
  // so only the launcher's pointer test sends a view to the scalar path.)
  const Tensor base = Tensor::randn({6, 3}, 10);
  {
    const int64_t n = 5, V = 3;
    Tensor xr = base.slice(1, n + 1).detach().set_requires_grad(true);
    Tensor ref = cross_entropy(xr, make_targets(n, V, 0, kCPU));
    ref.backward();
    Tensor xe = base.to(kEmu).slice(1, n + 1).detach().set_requires_grad(true);
    Tensor out = cross_entropy(xe, make_targets(n, V, 0, kEmu));
    out.backward();
    CHECK_EMU_CLOSE(out, ref, DType::f32);
    CHECK_EMU_CLOSE(xe.grad(), xr.grad(), DType::f32);
  }
}

// The pack fold (fold_n) skips a NaN in its max (fmaxf does) but must keep it
// in the sum, and so must a merge of two partials with no finite value; the
// prefetching form's max skips it too and its sum must keep it: a
// NaN anywhere in a row, a whole 16-byte pack of them included, makes that
// row's loss NaN, never a finite number.
TEST_CASE("emu cross_entropy: a NaN logit makes its row's loss NaN", "[emu][kernels]") {
  const int64_t V = 320;  // bf16: 40 packs of 8 (V % 8 == 0 takes the 16-byte path)
  for (gpu::CrossEntropyForm f : kForms)
    for (const std::vector<int64_t>& nans :
         std::vector<std::vector<int64_t>>{{0},
                                           {150},
                                           {319},
                                           {0, 1, 2, 3, 4, 5, 6, 7},
                                           {8, 9, 10, 11, 12, 13, 14, 15},
                                           // a pack whose thread's first shuffle partner holds nothing
                                           {256, 257, 258, 259, 260, 261, 262, 263}}) {
      const Tensor base = Tensor::randn({V}, 11);
      std::vector<float> row(base.data<float>(), base.data<float>() + V);
      for (int64_t i : nans) row[size_t(i)] = std::nanf("");
      const Tensor x = Tensor::from_vector(row, {1, V}).to(DType::bf16).to(kEmu);
      const Form form(f);
      const float loss = cross_entropy(x, Tensor::from_ints({100}, {1}, kEmu)).item();  // the target itself not NaN
      INFO(form_name(f) << ": NaN at " << nans.front() << " (" << nans.size() << " of them)");
      CHECK(std::isnan(loss));
    }
  const Tensor clean = Tensor::randn({1, V}, 11).to(DType::bf16).to(kEmu);
  CHECK(std::isfinite(cross_entropy(clean, Tensor::from_ints({3}, {1}, kEmu)).item()));
}

// Logits of magnitude 1e10 match the cpu reference, whose exp(x - max) is
// 1 at the max. The kernel's 2^((x - m) log2 e) is too; x log2e - m log2e in
// one FFMA would not be (m log2e's rounding is 2^9 at this size: 2^512).
TEST_CASE("emu cross_entropy: logits of magnitude 1e10 match the cpu reference", "[emu][kernels]") {
  for (gpu::CrossEntropyForm f : kForms) {
    const Form form(f);
    for (DType t : {DType::f32, DType::bf16}) check_against_cpu(Tensor::randn({5, 320}, 12, 1e10f), t, 0, 1.0);
  }
}

TEST_CASE("emu cross_entropy: targets are checked before the launch", "[emu][kernels]") {
  const Tensor x = Tensor::randn({3, 5}, 1).to(kEmu);
  CHECK_THROWS_WITH(cross_entropy(x, Tensor::from_ints({0, 5, 1}, {3}, kEmu)),
                    Catch::Contains("target 5 at row 1 outside the vocabulary [0, 5)"));
  CHECK_THROWS_WITH(cross_entropy(x.to(DType::f64), Tensor::from_ints({0, 1, 1}, {3}, kEmu)),
                    Catch::Contains("dtype f64 not supported on " + kEmu.str()));
}

TEST_CASE("emu cross_entropy: the expected seed is folded into the forward, no rescale pass", "[emu][kernels]") {
  const int64_t N = 7, V = 40;
  const Tensor logits = Tensor::randn({N, V}, 21, 2.f);
  for (DType t : {DType::f32, DType::bf16})
    for (double seed : {1.0, 0.25}) {
      INFO(dtype_name(t) << " seed " << seed);
      Tensor xr = rounded(logits, t).set_requires_grad(true);
      Tensor ref = cross_entropy(xr, make_targets(N, V, 3, kCPU), kIgnore);
      ref.backward(Tensor::full({}, seed, DType::f32));
      Tensor xe = on_emu(logits, t).set_requires_grad(true);
      Tensor out;
      {
        const ExpectedSeed expected(seed);
        out = cross_entropy(xe, make_targets(N, V, 3, kEmu), kIgnore);
      }
      KernelProfile prof(kEmu);
      prof.start();
      run_backward(out, seed);
      prof.stop();
      for (const KernelCall& c : prof.calls()) CHECK(c.name != "cross_entropy_scale_grad");
      CHECK_EMU_CLOSE(xe.grad(), xr.grad(), t);
      // Announced but seeded otherwise: rescaled by the seed over the announced one.
      Tensor xe2 = on_emu(logits, t).set_requires_grad(true);
      {
        const ExpectedSeed expected(0.5);
        out = cross_entropy(xe2, make_targets(N, V, 3, kEmu), kIgnore);
      }
      out.backward(Tensor::full({}, seed, DType::f32, kEmu));
      CHECK_EMU_CLOSE(xe2.grad(), xr.grad(), t);
    }
}

TEST_CASE("emu cross_entropy_padded: V classes in rows of W equal the loss on the first V columns", "[emu][kernels]") {
  // W = 64 and 48 keep 16-byte rows (the vector path) with a scalar tail of
  // V % pack; W = 45 has unaligned rows (the scalar path). The padding holds
  // large values: a kernel that read it would change the loss.
  for (gpu::CrossEntropyForm f : kForms)
    for (DType t : {DType::f32, DType::bf16})
      for (auto [V, W] : {std::pair<int64_t, int64_t>{50, 64}, {37, 48}, {40, 45}, {64, 64}}) {
        const Form form(f);
        INFO(form_name(f) << " " << dtype_name(t) << " V = " << V << " W = " << W);
        const int64_t N = 9;
        Tensor full = Tensor::randn({N, W}, uint64_t(V * 100 + W), 2.f);
        {
          float* p = full.data<float>();
          for (int64_t r = 0; r < N; ++r)
            for (int64_t v = V; v < W; ++v) p[r * W + v] = 30.f;
        }
        Tensor xr = rounded(narrow(full, 1, 0, V), t).set_requires_grad(true);
        Tensor ref = cross_entropy(xr, make_targets(N, V, 4, kCPU), kIgnore);
        ref.backward(Tensor::full({}, 0.5, DType::f32));
        Tensor xe = on_emu(full, t).set_requires_grad(true);
        Tensor out = cross_entropy_padded(xe, make_targets(N, V, 4, kEmu), V, kIgnore);
        out.backward(Tensor::full({}, 0.5, DType::f32, kEmu));
        CHECK_EMU_CLOSE(out, ref, t);
        CHECK_EMU_CLOSE(narrow(xe.grad(), 1, 0, V), xr.grad(), t);
        const std::vector<double> g = values(xe.grad());
        for (int64_t r = 0; r < N; ++r)
          for (int64_t v = V; v < W; ++v) CHECK(g[size_t(r * W + v)] == 0.0);
        // The cpu narrows the padding off: the same loss as the unpadded one.
        Tensor xc = rounded(full, t).set_requires_grad(true);
        Tensor outc = cross_entropy_padded(xc, make_targets(N, V, 4, kCPU), V, kIgnore);
        outc.backward(Tensor::full({}, 0.5, DType::f32));
        CHECK(outc.item() == ref.item());
        CHECK(values(narrow(xc.grad(), 1, 0, V)) == values(xr.grad()));
      }
  const Tensor x = Tensor::randn({3, 8}, 1).to(kEmu);
  CHECK_THROWS_WITH(cross_entropy_padded(x, Tensor::from_ints({0, 5, 1}, {3}, kEmu), 5),
                    Catch::Contains("target 5 at row 1 outside the vocabulary [0, 5)"));
  CHECK_THROWS_WITH(cross_entropy_padded(x, Tensor::from_ints({0, 5, 1}, {3}, kEmu), 9),
                    Catch::Contains("9 classes in logits"));
}
