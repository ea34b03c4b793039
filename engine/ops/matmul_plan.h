// The GEMM plans of engine/ops/matmul.cpp: each product of matmul's forward
// and backward as GemmCalls (kernels/gemm/gemm.h), decided once and run by
// whichever executor owns the device (OpenBLAS on cpu, the hand-written GEMM
// on emu, cuBLASLt on cuda). Exposed (in eng::detail) so that
// tests/kernels/test_cublaslt_plan.cpp can hand the very calls matmul makes
// to every executor, and so that linear_gelu runs matmul's plans and backward.
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

// What a plan's GEMM does besides the product (kernels/gemm/gemm.h's
// Epilogue), for one-step plans, each field undefined when unused:
//   bias:     added to every row (the GEMM's epilogue on a GPU; on the cpu
//             cpu::gemm_bias, or for a batched product written into C first
//             and a beta = 1 GEMM);
//   gelu_pre: with bias, out = gelu(pre) and gelu_pre = pre, the
//             pre-activation (gelu_aux_bias; on the cpu: GEMM into
//             gelu_pre, then cpu::gelu_forward);
//   residual: out = residual + product (+ bias when given: bias_residual,
//             else residual; emu/cuda);
//   dgelu_pre: out = gelu'(dgelu_pre) * product, GELU's backward in the
//             GEMM that computes its output's gradient (dgelu, emu/cuda);
//   dbias:    receives the bias gradient from the epilogue (bgrad,
//             emu/cuda, bias_grad_fusable plans); with dgelu_pre, the
//             column sums of out, the gradient it makes (dgelu_bgrad:
//             cuBLASLt's DGELU_BGRAD; elsewhere the dgelu GEMM, then
//             the bias_grad kernel over out).
struct PlanEpilogue {
  Tensor bias = {}, gelu_pre = {}, residual = {}, dgelu_pre = {}, dbias = {};
};

// Runs a plan into `out` on its device (OpenBLAS, the hand-written GEMM or
// cuBLASLt), `a`, `b`, `g` feeding the steps' operands. `out` is in the
// operands' dtype, or fp32 of 16-bit operands on emu/cuda where the plan's
// GEMMs are G^T X (out_f32: a weight gradient written in fp32, with dbias
// in fp32 as well: wide_output_ok).
void run_plan(const GemmPlan& plan, const Tensor& a, const Tensor& b, const Tensor& g, const Tensor& out,
              const PlanEpilogue& epi = {});
// Whether a plan's GEMMs can write an fp32 `out` of 16-bit operands on dev.
bool wide_output_ok(const GemmPlan& plan, Device dev);

// matmul's backward for C = op(A) op(B) (+ bias) given G = dL/dC: the
// gradients {dA, dB, dbias} that `needs` asks for (undefined otherwise), from
// the saved A and B. dbias_made: the bias gradient when a kernel before
// made it (the column sums of G that the GEMM making G wrote: GradEpilogue's
// dbias), returned as it is in place of one made here.
std::vector<Tensor> matmul_backward(const Tensor& a, const Tensor& b, const Tensor& g, const MatmulDims& d, Trans ta,
                                    Trans tb, const std::vector<bool>& needs, const Tensor& dbias_made = Tensor());

}  // namespace eng::detail
