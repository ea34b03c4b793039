// The GEMM plans of engine/ops/matmul.cpp: each product of matmul's forward
// and backward as GemmCalls (kernels/gemm/gemm.h), decided once and run by
// whichever executor owns the device (OpenBLAS on cpu, the hand-written GEMM
// on emu, cuBLASLt on cuda). Exposed (in eng::detail) so that
// tests/kernels/test_cublaslt_plan.cpp can hand the very calls matmul makes
// to every executor.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "kernels/gemm/gemm.h"

namespace eng::detail {

struct MatmulDims {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool shared_b = false;  // B is 2-D and used by every batch
  Shape out_shape;
};

MatmulDims matmul_dims(const Tensor& a, const Tensor& b, Trans ta, Trans tb);

// A plan names which tensor feeds each GEMM operand.
enum class Operand : uint8_t { a, b, g };  // the inputs A, B and the output grad G
struct GemmStep {
  GemmCall call;
  Operand first, second;                        // the GEMM's A and B
  int64_t offset_first = 0, offset_second = 0;  // in elements
};
using GemmPlan = std::vector<GemmStep>;

GemmPlan plan_forward(const MatmulDims& d, Trans ta, Trans tb);
// dA (as stored) = G op(B)^T, or op(B) G^T when A was transposed.
GemmPlan plan_grad_a(const MatmulDims& d, Trans ta, Trans tb);
// dB (K x N) = op(A)^T G, or (N x K) = G^T op(A) when B was transposed.
GemmPlan plan_grad_b(const MatmulDims& d, Trans ta, Trans tb);

// Whether the dB plan's single GEMM is G^T X over all rows of a contiguous G
// (a linear layer's weight gradient), so the bias gradient, the column sums
// of G, is cuBLASLt's bias-gradient epilogue of that same GEMM.
bool bias_grad_fusable(const GemmPlan& grad_b, const MatmulDims& d);

}  // namespace eng::detail
