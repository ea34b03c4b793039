// Helpers for kernel tests on the emu device: run an op on the cpu (the
// reference, in f32 on inputs already rounded to the storage dtype) and on
// emu (in the storage dtype), and compare with per-dtype tolerances.
// Tolerances: f32 1e-5 abs/rel (different but exact-enough math, e.g. tanhf
// vs the cpu's exp-based tanh); bf16 8e-3 rel (one rounding of the output,
// half an ulp = 2^-9, plus inputs that differ by an ulp in intermediate
// steps); f16 1e-3 rel (half an ulp = 2^-12, same reasoning).
#pragma once
#include <cstdlib>

#include "engine/device.h"
#include "tests/test_util.h"

namespace eng::test {

// The device these kernel tests run on: emu by default; a GPU machine reruns
// the whole suite on the real device with ENGINE_TEST_GPU_DEVICE=cuda
// (ctest's gpu.kernel_suite does).
inline Device kernel_test_device() {
  const char* env = std::getenv("ENGINE_TEST_GPU_DEVICE");
  return env && *env ? Device::parse(env) : Device{DeviceType::emu, 0};
}
inline const Device kEmu = kernel_test_device();

// Whether the kernel test device rounds as the cpu loops do, operation by
// operation: the emulator as built by default. A GPU contracts a * b + c into
// FMAs, and so do the emulated kernels of an ENGINE_EMU_FMA build.
#if defined(ENGINE_EMU_FMA)
inline const bool kKernelsRoundLikeCpu = false;
#else
inline const bool kKernelsRoundLikeCpu = kEmu.type == DeviceType::emu;
#endif

struct Tol {
  double atol, rtol;
};
inline Tol tol_for(DType t) {
  if (t == DType::bf16) return {8e-3, 8e-3};
  if (t == DType::f16) return {1e-3, 1e-3};
  return {1e-5, 1e-5};
}

// x rounded to dtype t and back to f32 on the cpu: the reference's input.
inline Tensor rounded(const Tensor& x, DType t) { return x.detach().to(t).to(DType::f32).detach(); }

// The emu tensor of the same values in dtype t.
inline Tensor on_emu(const Tensor& x, DType t) { return x.detach().to(t).to(kEmu).detach(); }

#define CHECK_EMU_CLOSE(emu_tensor, ref_tensor, dtype)                                                         \
  do {                                                                                                         \
    const ::eng::test::Tol tol_ = ::eng::test::tol_for(dtype);                                                 \
    CHECK_CLOSE(::eng::test::values((emu_tensor).to(::eng::kCPU)), ::eng::test::values(ref_tensor), tol_.atol, \
                tol_.rtol);                                                                                    \
  } while (0)

}  // namespace eng::test
