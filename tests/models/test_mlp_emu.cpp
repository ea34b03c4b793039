// The MLP gives the same losses, gradients and AdamW steps on the emu device
// (the hand-written CUDA kernels, emulated) as on the cpu.
#include "tests/models/mlp_device_check.h"

TEST_CASE("mlp: same loss, gradients and AdamW steps on cpu and emu", "[emu][e2e][mlp]") {
  eng::test::check_mlp_matches_cpu(eng::Device{eng::DeviceType::emu, 0});
}
