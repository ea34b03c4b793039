// The kernel checks on the real cuda device: the same kernels the emu tests
// run, compiled by nvcc, against the cpu reference. They need a GPU, so they
// are tagged [gpu] (ctest label "gpu") and skip with a message when no GPU
// answers, which is every machine this project is built on today.
#include "engine/device.h"
#include "tests/kernels/emu_check.h"
#include "tests/models/mlp_device_check.h"

using namespace eng;
using namespace eng::test;

namespace {
bool gpu_or_skip() {
  if (cuda_available()) return true;
  WARN("skipped: no CUDA device answers" << (cuda_built() ? "" : " (and this build has no CUDA)"));
  return false;
}
const Device kCuda{DeviceType::cuda, 0};
}  // namespace

TEST_CASE("cuda: MLP training matches the cpu", "[gpu]") {
  if (!gpu_or_skip()) return;
  check_mlp_matches_cpu(kCuda);
}

TEST_CASE("cuda: row-wise kernels match the cpu in f32, bf16 and f16", "[gpu]") {
  if (!gpu_or_skip()) return;
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const Tensor x = Tensor::randn({37, 33}, 1), w = Tensor::randn({33}, 2), b = Tensor::randn({33}, 3);
    auto dev = [&](const Tensor& v) { return v.detach().to(t).to(kCuda); };
    const Tensor ln = layernorm(dev(x), dev(w), dev(b));
    CHECK_EMU_CLOSE(ln, layernorm(rounded(x, t), rounded(w, t), rounded(b, t)), t);
    const Tensor sm = softmax(dev(x));
    CHECK_EMU_CLOSE(sm, softmax(rounded(x, t)), t);
    const Tensor g = gelu(dev(x));
    CHECK_EMU_CLOSE(g, gelu(rounded(x, t)), t);
    const Tensor p = permute(dev(x.reshape({37, 3, 11})), {2, 0, 1});
    CHECK_EMU_CLOSE(p, permute(rounded(x, t).reshape({37, 3, 11}), {2, 0, 1}), t);
  }
}
