// Launchers of kernels/cuda/gemm.cu: the hand-written tiled GEMM (with bias
// and GELU epilogues) and the bias gradient. The GEMM takes the same
// GemmCall as the cpu executor and the same Epilogue as cuBLASLt
// (kernels/gemm/gemm.h), so engine/ops/matmul.cpp plans each product once and
// hands the plan to whichever device runs it.
//   tiled_gemm:    C_i = alpha op(A_i) op(B_i) + beta C_i, then the epilogue:
//                  none; bias (+ bias[n] on every row); gelu_bias (gelu of
//                  that); gelu_aux_bias (the same, and the pre-activation,
//                  rounded to st, into aux, laid out as C: ldc, stride_c).
//                  bgrad (a linear layer's dW = G^T X, A transposed, one
//                  batch): bias is written with op(A)'s row sums (G's
//                  column sums), as cuBLASLt's BGRADB. bias_residual: + aux
//                  (read, laid out as C) + bias[n], one rounding; residual:
//                  + aux alone.
//                  dgelu: the product rounded to st, times gelu'(aux) (aux
//                  read: the pre-activation). GELU and its gradient are
//                  computed from rounded values, so each fused epilogue
//                  equals the GEMM then activation.cu's kernel bit for bit.
//                  fp32 accumulation, A/B/C/bias/aux all in storage st, but
//                  C and a bias gradient in fp32 when call.out_f32 (16-bit
//                  A and B, A transposed and B not, no epilogue or bgrad).
//   bias_backward: db[c] = sum_r dout[r, c] over a contiguous (rows, cols)
//                  dout, in a fixed order (deterministic, no atomics).
#pragma once
#include "kernels/cuda/gpu_ops.h"
#include "kernels/gemm/gemm.h"

#define ENGINE_GEMM_LAUNCHERS                                                                                     \
  void tiled_gemm(gpu::Storage st, const GemmCall& call, const void* A, const void* B, void* C, const void* bias, \
                  Epilogue epi, void* aux, void* stream);                                                         \
  void bias_backward(gpu::Storage st, const void* dout, void* db, int64_t rows, int64_t cols, void* stream);
ENGINE_GPU_DECLARE(ENGINE_GEMM_LAUNCHERS)

// Costs (kernels/kernel_cost.h): tiled_gemm: flops = 2 M N K batch; bytes =
// sizeof(T) (batch M K + K N, once when stride_b = 0 shares B across the
// batch, else batch times) + sizeof(C) batch M N (beta != 0 ? 2 : 1), + N
// sizeof(T) for the bias, + batch M N sizeof(T) for aux (the GELU's written,
// the residual or the pre-activation read), each operand once (the .cu's
// bytes count the tile re-reads, A once per column tile of C and B once per
// row tile, which caches absorb: the kernel's efficiency, not its bytes). A
// GEMM is timed by its shape, so the epilogues' ~20-30 M N flops are left
// out; bgrad adds M elements of C's type written (its flops, M K, are the
// GEMM's shadow), dgelu_bgrad N (cuBLASLt's: the sums of C's columns).
// bias_backward: bytes = sizeof(T) (rows cols + cols), flops = rows cols.
namespace eng::kcost {
// A GEMM's cost, also the ladder's (ladder.h): the shape and its elements,
// A and B of elem_bytes, C of c_bytes (0: elem_bytes).
inline kprof::Cost gemm_cost(const GemmCall& c, int elem_bytes, double epilogue_elems, int c_bytes = 0) {
  kprof::Cost r;
  r.kind = kprof::Kind::gemm;
  r.m = c.M, r.n = c.N, r.k = c.K, r.batch = c.batch;
  r.elem_bytes = elem_bytes;
  if (c_bytes == 0) c_bytes = elem_bytes;
  r.aligned = c.lda * elem_bytes % 16 == 0 && c.ldb * elem_bytes % 16 == 0 && c.ldc * c_bytes % 16 == 0;
  if (c.M == 0 || c.N == 0 || c.batch == 0) return r;  // nothing launched
  const double batch = double(c.batch), mn = double(c.M) * double(c.N);
  const double b_copies = c.stride_b == 0 && c.batch > 1 ? 1 : batch;
  const double ab = batch * double(c.M) * double(c.K) + b_copies * double(c.K) * double(c.N);
  r.bytes = elem_bytes * (ab + epilogue_elems) + c_bytes * batch * mn * (c.beta != 0.f ? 2 : 1);
  r.flops = 2 * mn * double(c.K) * batch;
  return r;
}
inline kprof::Cost tiled_gemm(gpu::Storage st, const GemmCall& call, const void*, const void*, void*, const void*,
                              Epilogue epi, void*, void*) {
  const int t = int(gpu::storage_bytes(st)), tc = call.out_f32 ? 4 : t;
  const double aux = epilogue_takes_aux(epi) ? double(call.batch) * double(call.M) * double(call.N) : 0;
  kprof::Cost r = gemm_cost(call, t, (epilogue_adds_bias(epi) ? double(call.N) : 0) + aux, tc);
  if (epi == Epilogue::bgrad) r.bytes += double(tc) * double(call.M);
  if (epi == Epilogue::dgelu_bgrad) r.bytes += double(tc) * double(call.N);  // cuBLASLt's alone
  return r;
}
inline kprof::Cost bias_backward(gpu::Storage st, const void*, void*, int64_t rows, int64_t cols, void*) {
  return kprof::memory((double(rows) + 1) * double(cols) * gpu::storage_bytes(st), double(rows) * double(cols));
}
}  // namespace eng::kcost
