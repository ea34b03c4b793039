// The emulator's count-only mode, for host code that asks (train) as well as
// the launch path. A launch is checked (grid, block, shared memory) and
// counted by a listening step profile (kernels/kernel_cost.h), but its
// threads do not run: a step too large to emulate (GPT-2 124M,
// bench/gpu_step_model.sh) still shows its real launches and costs. The
// memory the kernels would write keeps whatever it held, so the numbers the
// step computes are meaningless. On while ENGINE_EMU_COUNT_ONLY=1 is set
// (read once, at start-up) or after set_count_only(true).
#pragma once

namespace emu {
void set_count_only(bool on);
bool count_only();
}  // namespace emu
