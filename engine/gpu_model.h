// A GPU's time for a step's kernels, modelled from their bytes and FLOPs
// (engine/kernel_profile.h): how `train --kernel_profile` on emu or cpu
// says what the step would cost on an H100 (--model_gpu), and how a change
// is judged before a GPU measures it (docs/gpu.md, "The step model").
//
// A call's time = its launches x the per-launch cost + the longer of
//   bytes / (the kernel's measured share of the memory bandwidth x HBM), and
//   FLOPs / (the rate its kind reaches):
// GEMMs at cuBLASLt's measured share of the precision's tensor-core peak
// (less where a row stride is not 16-byte aligned), attention at the rate
// its kernels measured, the rest at the CUDA-core FP32 peak. Every figure in
// the tables (gpu_model.cpp) says whether it was measured (docs/gpu.md, the
// H100 run) or assumed; other GPUs take the H100's shares of their own peaks.
#pragma once
#include <string>
#include <vector>

#include "engine/kernel_profile.h"
#include "engine/peaks.h"
#include "engine/precision.h"

namespace eng {

// Which attention the modelled step runs: the kernels the run launched, or
// cuDNN's SDPA in their place (emu cannot run cuDNN; the profile's calls to
// our attention_forward/backward are then timed at cuDNN's measured rates).
enum class ModelAttention { as_run, cudnn };

struct GpuModel {
  std::string key;  // "h100"
  const GpuPeak* peak;
};
// "h100", "h200", "a100" (case-insensitive); a one-line UserError naming the choices otherwise.
GpuModel gpu_model(const std::string& key);

struct ModelledCall {
  double ms = 0;
  std::string basis;  // "memory at 49% of HBM (measured)", "GEMM bf16 at 60% of peak (measured)", ...
};
ModelledCall model_call(const GpuModel& gpu, const KernelCall& call, Precision level, ModelAttention attention);

// One row of the profile table: the calls of one name.
struct KernelRow {
  std::string name;
  kprof::Kind kind = kprof::Kind::memory;
  int64_t calls = 0, launches = 0;
  double bytes = 0, flops = 0;
  double measured_ms = -1;  // the calls' sum on cuda; -1 none
  double model_ms = 0;      // the calls' modelled sum
  std::string basis;        // the model's basis (the first call's)
};
// Rows by name, the longest first (measured time, else modelled).
std::vector<KernelRow> kernel_rows(const std::vector<KernelCall>& calls, const GpuModel& gpu, Precision level,
                                   ModelAttention attention);

// The table train prints: a header naming the device and model, one line per
// row (calls, launches, MB, GFLOP, ms, GB/s, TFLOP/s, share of the step),
// the totals last.
std::string kernel_table(const std::vector<KernelRow>& rows, const std::string& title);

}  // namespace eng
