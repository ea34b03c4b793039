// Exponentials in base 2, the way the softmax kernels take them: e^x =
// 2^(x log2 e), so a scale or a max folds into the one FFMA before the
// exponential (FlashAttention's exp2 trick). expf is about ten instructions
// and a branch (range reduction around MUFU.EX2); exp2_approx is one MUFU.EX2.
// Where a kernel spends more issue slots on its exponentials than on its
// loads or its tensor-core work, that is the difference.
#pragma once
#include <cmath>

#include "kernels/cuda/portable.cuh"

namespace eng::ENGINE_GPU_NS {

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// 2^x as ex2.approx.ftz (about 2 ulp; results under 2^-126 flushed to 0;
// 2^-inf = 0, 2^NaN = NaN). The emulator computes exp2 exactly and flushes
// as the GPU does.
__device__ __forceinline__ float exp2_approx(float x) {
#if defined(__CUDACC__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  const float r = std::exp2(x);
  return r < 1.17549435e-38f ? 0.f : r;
#endif
}

}  // namespace eng::ENGINE_GPU_NS
