// The workbench's cases, one function per kernel family (bench/cases_*.cpp).
// Each case calls the kernels directly, as the engine ops do: kernels/cpu
// (and kernels/gemm's OpenBLAS) on the cpu device, the kernels/cuda launchers
// on emu and cuda, so a timing holds the kernel and nothing of the op's
// allocation or autograd bookkeeping. The bytes/flops of a case are the
// formulas of the kernel's comment block, for f32 storage, with the file named.
#pragma once
#include <vector>

#include "bench/harness.h"
#include "kernels/cuda/gpu_ops.h"  // ENGINE_GPU_CALL

namespace eng::bench {

inline Tensor randn(const Shape& shape, uint64_t seed, Device dev, float std = 1.f) {
  return Tensor::randn(shape, seed, std, DType::f32, dev);
}

std::vector<Case> matmul_cases(bool quick);
std::vector<Case> layernorm_softmax_cases(bool quick);
std::vector<Case> gelu_adamw_cases(bool quick);
std::vector<Case> cross_entropy_embedding_cases(bool quick);
std::vector<Case> attention_cases(bool quick);
std::vector<Case> reduce_cases(bool quick);
std::vector<Case> llama_cases(bool quick);      // rmsnorm, swiglu, rope (bench/cases_llama.cpp)
std::vector<Case> optimizer_cases(bool quick);  // adamw8bit_step, adafactor_step

// The GEMM shape sweep (--gemm-sweep): TFLOP/s for every (M, N, K) in the
// ranges and their best/median/worst, per GEMM implementation.
void gemm_sweep(Workbench& wb);

}  // namespace eng::bench
