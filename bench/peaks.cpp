// Peak rates: the GPU datasheet table and the cpu's measured copy and SGEMM.
#include "bench/peaks.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/gemm/gemm.h"

namespace eng::bench {

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
// PCIe/NVL variants have lower clocks and bandwidth, so they are not matched.
static const GpuPeak kA100{"A100 SXM 80GB", 2039, 19.5, 156, 312};
static const GpuPeak kH100{"H100 SXM", 3350, 67, 495, 989};
static const GpuPeak kH200{"H200 SXM", 4800, 67, 495, 989};

const GpuPeak* gpu_peak_for(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("PCIe") || has("NVL")) return nullptr;
  if (has("A100") && has("80GB")) return &kA100;
  if (has("H100")) return &kH100;
  if (has("H200")) return &kH200;
  return nullptr;
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

static double sgemm_tflops(int64_t n, int trials) {
  std::vector<float> a(size_t(n * n), 1.0f), b(size_t(n * n), 0.5f), c(size_t(n * n));
  double best = 0;
  for (int t = 0; t < trials; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    cpu::gemm<float>(Trans::N, Trans::N, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / s / 1e12);
  }
  return best;
}

CpuPeaks measure_cpu_peaks(bool quick) {
  CpuPeaks p;
  p.copy_bytes = size_t(quick ? 64 : 512) << 20;  // well past any L3 either way
  p.copy_gbps = copy_gbps(p.copy_bytes, quick ? 3 : 10);
  p.sgemm_n = 1024;
  p.sgemm_tflops = sgemm_tflops(p.sgemm_n, quick ? 3 : 10);
  p.threads = omp_get_max_threads();
  return p;
}

}  // namespace eng::bench
