// What MFU and "percent of peak" divide by, shared by the train program and
// the kernel workbench (bench/). On a known GPU: the datasheet's memory
// bandwidth and dense compute rates per math mode (table in peaks.cpp,
// sources named there), chosen by the device's name and SM count; an
// unknown GPU gets no peak (and no MFU) rather than a wrong one. On the cpu:
// this machine's own measured rates, after a warm-up, best of several: a
// large parallel copy and OpenBLAS SGEMMs (square, or shaped like the
// model's GEMMs), so the percentages say how close a kernel or a training
// run gets to what the box can actually do.
#pragma once
#include <cstdint>
#include <string>

#include "engine/device.h"
#include "engine/precision.h"

namespace eng {

struct GpuPeak {
  const char* label;   // "A100 SXM 80GB"
  int sms;             // streaming multiprocessors of that part (0: any)
  double hbm_gbps;     // GB/s (1e9 bytes/s)
  double fp32_tflops;  // CUDA-core FP32 (no tensor cores): our tiled GEMM's ceiling, cuBLASLt fp32
  double tf32_tflops;  // tensor-core TF32, dense: cuBLASLt tf32
  double bf16_tflops;  // tensor-core BF16 = FP16 with FP32 accumulation, dense: cuBLASLt bf16, fp16
};

// The table entry for a CUDA device name ("NVIDIA A100-SXM4-80GB", "NVIDIA
// H100 80GB HBM3", "NVIDIA H100 PCIe", ...) and SM count (0: not checked),
// or nullptr for GPUs not in the table.
const GpuPeak* gpu_peak_for(const std::string& device_name, int sms = 0);

// The dense rate a precision level's GEMMs run at: O0 FP32 (CUDA cores),
// O1 TF32, O2/O2-fp16/O3 BF16/FP16 tensor cores (TFLOP/s).
double gpu_peak_tflops(const GpuPeak& p, Precision level);

struct CpuPeaks {
  double copy_gbps = 0;     // (read + write) bytes / s of the best copy
  double sgemm_tflops = 0;  // best OpenBLAS SGEMM rate
  int64_t sgemm_n = 0;      // its size (n x n x n)
  size_t copy_bytes = 0;    // the copied buffer's size
  int threads = 0;          // OpenMP threads
};
// quick: a smaller copy and fewer trials, for CI.
CpuPeaks measure_cpu_peaks(bool quick);

// The best rate (FLOP/s) of OpenBLAS SGEMMs of shape (m x k) @ (k x n) with
// the threads this process uses, after one warm-up product, best of `trials`.
double measure_sgemm_flops(int64_t m, int64_t n, int64_t k, int trials);

// The peak one device of a training run is measured against, in FLOP/s, and
// a line saying what it is ("cpu: measured OpenBLAS SGEMM ...", "H100 SXM
// BF16 dense (datasheet) ..."); 0 with the reason when there is none (emu,
// an unknown GPU). gemm_shape: a typical GEMM of the model (m, n, k), for
// the cpu measurement.
struct DevicePeak {
  double flops = 0;
  std::string note;
};
DevicePeak device_peak(Device dev, Precision level, int64_t m, int64_t n, int64_t k);

}  // namespace eng
