// The peak table MFU divides by (engine/peaks.h), against the datasheets'
// dense figures typed in here from NVIDIA's A100/H100/H200 datasheets.
#include <catch2/catch.hpp>

#include "engine/peaks.h"

using namespace eng;

TEST_CASE("peaks: known GPUs and precision levels give the datasheet's dense rate", "[peaks]") {
  struct Row {
    const char* name;
    int sms;
    double fp32, tf32, bf16;
  };
  for (const Row& r :
       {Row{"NVIDIA A100-SXM4-80GB", 108, 19.5, 156, 312}, Row{"NVIDIA H100 80GB HBM3", 132, 67, 495, 989},
        Row{"NVIDIA H100 PCIe", 114, 51, 378, 756}, Row{"NVIDIA H200", 132, 67, 495, 989}}) {
    const GpuPeak* p = gpu_peak_for(r.name, r.sms);
    REQUIRE(p != nullptr);
    CHECK(gpu_peak_tflops(*p, Precision::O0) == r.fp32);
    CHECK(gpu_peak_tflops(*p, Precision::O1) == r.tf32);
    for (Precision lv : {Precision::O2, Precision::O2_fp16, Precision::O3}) CHECK(gpu_peak_tflops(*p, lv) == r.bf16);
  }
}

TEST_CASE("peaks: unknown GPUs and variants get no peak, emu none with a note", "[peaks]") {
  CHECK(gpu_peak_for("NVIDIA GeForce RTX 4090") == nullptr);
  CHECK(gpu_peak_for("NVIDIA H100 NVL") == nullptr);
  CHECK(gpu_peak_for("NVIDIA H100 80GB HBM3", 66) == nullptr);  // not the SXM part's 132 SMs
  CHECK(gpu_peak_for("NVIDIA A100-SXM4-40GB") == nullptr);      // 40GB: other bandwidth, not in the table
  const DevicePeak e = device_peak(Device{DeviceType::emu, 0}, Precision::O0, 64, 64, 64);
  CHECK(e.flops == 0);
  CHECK_THAT(e.note, Catch::Contains("no MFU"));
}

TEST_CASE("peaks: the cpu peak is measured on the given GEMM shape", "[peaks]") {
  const DevicePeak c = device_peak(kCPU, Precision::O2, 256, 128, 64);
  CHECK(c.flops > 1e8);  // any machine that runs the tests does 0.1 GFLOP/s
  CHECK_THAT(c.note, Catch::Contains("measured OpenBLAS SGEMM 256x128x64"));
}
