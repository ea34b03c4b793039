// What "percent of peak" divides by. On a known GPU: the datasheet's memory
// bandwidth and dense compute rates (table in peaks.cpp, sources named
// there). On the cpu: this machine's own measured rates, taken at startup: a
// large parallel copy (best of N) and an OpenBLAS SGEMM (best of N), so the
// percentages say how close a kernel gets to what the box can actually do.
#pragma once
#include <cstdint>
#include <string>

namespace eng::bench {

struct GpuPeak {
  const char* label;   // "A100 SXM 80GB"
  double hbm_gbps;     // GB/s (1e9 bytes/s)
  double fp32_tflops;  // CUDA-core FP32 (no tensor cores): our tiled GEMM's ceiling, cuBLASLt fp32
  double tf32_tflops;  // tensor-core TF32, dense: cuBLASLt tf32
  double bf16_tflops;  // tensor-core BF16 = FP16 with FP32 accumulation, dense: cuBLASLt bf16, fp16
};

// The table entry whose GPU the CUDA device name ("NVIDIA A100-SXM4-80GB",
// "NVIDIA H100 80GB HBM3", ...) names, or nullptr for GPUs not in the table.
const GpuPeak* gpu_peak_for(const std::string& device_name);

struct CpuPeaks {
  double copy_gbps = 0;     // (read + write) bytes / s of the best copy
  double sgemm_tflops = 0;  // best OpenBLAS SGEMM rate
  int64_t sgemm_n = 0;      // its size (n x n x n)
  size_t copy_bytes = 0;    // the copied buffer's size
  int threads = 0;          // OpenMP threads
};
// quick: a smaller copy and fewer trials, for CI.
CpuPeaks measure_cpu_peaks(bool quick);

struct Peaks {
  CpuPeaks cpu;
  std::string gpu_name;          // "" when no GPU answers
  const GpuPeak* gpu = nullptr;  // nullptr for an unknown GPU
};

}  // namespace eng::bench
