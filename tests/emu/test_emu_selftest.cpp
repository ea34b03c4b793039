// Runs kernels/cuda/emu_selftest.cu, the source nvcc also compiles (target
// engine_emu_nvcc_selftest), under the emulator: the portability header
// proven from the g++ side with the same file. Reference: the sum in double
// on the host (of the bf16-rounded inputs for the bf16 case); tolerance 1e-4
// relative, for fp32 accumulation of ~1000 terms in a different order.
#include "tests/test_util.h"
// The kernel source comes after the test headers: it defines the CUDA keywords.
#include "kernels/cuda/emu_selftest.cu"
#include "kernels/rng.h"

TEST_CASE("emu selftest kernel: the nvcc-compiled source runs under the emulator", "[emu]") {
  for (const int n : {1, 31, 1000, 20000}) {
    std::vector<float> in(static_cast<size_t>(n));
    double ref = 0;
    for (int i = 0; i < n; ++i) ref += in[size_t(i)] = eng::rng::normal(7, uint64_t(i));
    float out = 0;
    eng::emu_selftest::sum(in.data(), &out, n, nullptr);
    INFO("n = " << n);
    CHECK(std::fabs(out - ref) <= 1e-4 * (1 + std::fabs(ref)));
  }
}

#if defined(ENGINE_EMU_HAVE_CUDA_HEADERS)
TEST_CASE("emu selftest kernel: bf16 input, fp32 math", "[emu]") {
  const int n = 777;
  std::vector<__nv_bfloat16> in(n);
  double ref = 0;
  for (int i = 0; i < n; ++i) {
    in[size_t(i)] = __float2bfloat16(eng::rng::normal(8, uint64_t(i)));
    ref += double(__bfloat162float(in[size_t(i)]));
  }
  float out = 0;
  eng::emu_selftest::sum(in.data(), &out, n, nullptr);
  CHECK(std::fabs(out - ref) <= 1e-4 * (1 + std::fabs(ref)));
}
#endif
