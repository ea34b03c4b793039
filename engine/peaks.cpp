// Peak rates: the GPU datasheet table and the cpu's measured copy and SGEMM.
#include "engine/peaks.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "engine/cuda_runtime.h"
#include "kernels/gemm/gemm.h"

namespace eng {

// Dense (no 2:4 sparsity) figures for the SXM parts, from NVIDIA's datasheets:
//  - NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM): 2,039 GB/s HBM2e,
//    19.5 TFLOP/s FP32, 156 TF32 Tensor Core, 312 BF16 and 312 FP16 Tensor
//    Core (the 312 / 624 / 624 there are "with sparsity").
//  - NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): 3.35 TB/s HBM3,
//    67 TFLOP/s FP32, 495 TF32, 989 BF16 and 989 FP16 (the datasheet prints
//    989 / 1,979 / 1,979, footnoted "with sparsity"; dense is half).
//  - NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): 4.8 TB/s HBM3e, the
//    same compute as H100 SXM.
// BF16 and FP16 dense rates are equal on all three, so one column serves
// cuBLASLt's bf16 and fp16 modes; the TF32 column its tf32 mode, FP32 its fp32
// mode and our CUDA-core kernels in every storage type.
//  - The PCIe cards, from the same datasheets: A100 80GB PCIe 1,935 GB/s and
//    the SXM part's compute; H100 PCIe 2.0 TB/s, 51 FP32, 378 TF32 and 756
//    BF16/FP16 dense (114 SMs against the SXM part's 132).
// NVL parts and other GPUs are not matched: no peak rather than a wrong one.
static const GpuPeak kTable[] = {
    {"A100 SXM 80GB", 108, 2039, 19.5, 156, 312}, {"A100 PCIe 80GB", 108, 1935, 19.5, 156, 312},
    {"H100 SXM", 132, 3350, 67, 495, 989},        {"H100 PCIe", 114, 2000, 51, 378, 756},
    {"H200 SXM", 132, 4800, 67, 495, 989},
};

const GpuPeak* gpu_peak_for(const std::string& name, int sms) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  const GpuPeak* p = nullptr;
  if (has("NVL")) return nullptr;
  if (has("A100") && has("80GB")) p = has("PCIe") ? &kTable[1] : &kTable[0];
  if (has("H100")) p = has("PCIe") ? &kTable[3] : &kTable[2];
  if (has("H200")) p = &kTable[4];
  if (p && sms > 0 && sms != p->sms) return nullptr;  // a cut-down or unknown variant
  return p;
}

double gpu_peak_tflops(const GpuPeak& p, Precision level) {
  switch (level) {
    case Precision::O0:
      return p.fp32_tflops;
    case Precision::O1:
      return p.tf32_tflops;
    default:
      return p.bf16_tflops;
  }
}

// Each thread copies its own contiguous slice, as the OpenMP kernels split
// their loops; bytes counted = read + write (STREAM's "copy" convention).
static double copy_gbps(size_t bytes, int trials) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // touched: no page faults in the timed copies
  double best = 0;
  for (int t = 0; t < trials; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    {
      const size_t nt = size_t(omp_get_num_threads()), i = size_t(omp_get_thread_num());
      const size_t lo = bytes * i / nt, hi = bytes * (i + 1) / nt;
      std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * double(bytes) / s / 1e9);
  }
  return best;
}

double measure_sgemm_flops(int64_t m, int64_t n, int64_t k, int trials) {
  std::vector<float> a(size_t(m * k), 1.0f), b(size_t(k * n), 0.5f), c(size_t(m * n));
  double best = 0;
  for (int t = -1; t < trials; ++t) {  // t = -1: the warm-up (thread pool start, page faults)
    const auto t0 = std::chrono::steady_clock::now();
    cpu::gemm<float>(Trans::N, Trans::N, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (t >= 0) best = std::max(best, 2.0 * double(m) * double(n) * double(k) / s);
  }
  return best;
}

CpuPeaks measure_cpu_peaks(bool quick) {
  CpuPeaks p;
  p.copy_bytes = size_t(quick ? 64 : 512) << 20;  // well past any L3 either way
  p.copy_gbps = copy_gbps(p.copy_bytes, quick ? 3 : 10);
  p.sgemm_n = 1024;
  p.sgemm_tflops = measure_sgemm_flops(p.sgemm_n, p.sgemm_n, p.sgemm_n, quick ? 3 : 10) / 1e12;
  p.threads = omp_get_max_threads();
  return p;
}

DevicePeak device_peak(Device dev, Precision level, int64_t m, int64_t n, int64_t k) {
  DevicePeak p;
  if (dev.type == DeviceType::emu) {
    p.note = "emu: kernels run in the emulator, no MFU";
    return p;
  }
  if (dev.type == DeviceType::cuda) {
    const std::string name = cudart::device_name(dev.index);
    const int sms = cudart::sm_count(dev.index);
    const GpuPeak* g = gpu_peak_for(name, sms);
    if (!g) {
      p.note = cat(name, " (", sms, " SMs) is not in the peak table (engine/peaks.cpp): no MFU");
      return p;
    }
    const char* mode = level == Precision::O0 ? "FP32" : level == Precision::O1 ? "TF32" : "BF16/FP16";
    p.flops = gpu_peak_tflops(*g, level) * 1e12;
    p.note = cat(g->label, " ", mode, " dense, datasheet: ", p.flops / 1e12, " TFLOP/s");
    return p;
  }
  // The cpu runs every precision level's GEMMs in fp32 (16-bit storage is emulated).
  p.flops = measure_sgemm_flops(m, n, k, 20);
  char buf[160];
  std::snprintf(buf, sizeof buf, "cpu: measured OpenBLAS SGEMM %lldx%lldx%lld, %d thread(s), best of 20: %.1f GFLOP/s",
                (long long)m, (long long)n, (long long)k, omp_get_max_threads(), p.flops / 1e9);
  p.note = buf;
  return p;
}

}  // namespace eng
