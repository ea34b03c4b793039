// One element of a GEMM's output after its product: what both hand-written
// GEMMs (gemm.cu's tiled CUDA-core one, gemm_mma.cu's tensor-core one) do
// as they store C, so the two take the same GemmCall and Epilogue
// (kernels/gemm/gemm.h) and give the same bits from the same fp32 sum.
// alpha, beta (reading C in its type TC), the residual (as cuBLASLt's
// beta C) and bias, then one rounding to C's type. GELU starts from that
// rounded pre-activation, exactly as activation.cu's GELU reading it back
// from memory would: the fused op equals linear then gelu bit for bit.
// Likewise GELU's gradient multiplies the rounded product, as
// activation.cu's gelu_backward reading it back would.
// bytes: C (read when beta != 0), bias[n], aux (written for gelu_aux_bias,
// read for bias_residual, residual and dgelu); flops ~ 3 (+ ~20 GELU, ~30 its gradient).
#pragma once
#include "base/error.h"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/storage.cuh"
#include "kernels/gemm/gemm.h"

namespace eng::ENGINE_GPU_NS {

// Element i (= m ldc + n) of C, the product `acc` at column n; bias null
// when the epilogue has none (also for bgrad, whose sums the kernel keeps
// apart); aux, the epilogue's matrix laid out as C, null when it has none.
template <typename T, typename TC>
__device__ __forceinline__ void store_with_epilogue(TC* __restrict__ C, int64_t i, float acc, const GemmCall& c,
                                                    Epilogue epi, const T* __restrict__ bias, int64_t n,
                                                    T* __restrict__ aux) {
  float v = c.alpha * acc;
  if (c.beta != 0.f) v = fmaf(c.beta, to_f32(C[i]), v);
  if (epi == Epilogue::bias_residual || epi == Epilogue::residual) v += to_f32(aux[i]);
  if (bias != nullptr) v += to_f32(bias[n]);
  const TC pre = from_f32<TC>(v);
  if (epi == Epilogue::gelu_aux_bias) aux[i] = from_f32<T>(v);
  C[i] = epi == Epilogue::gelu_bias || epi == Epilogue::gelu_aux_bias ? from_f32<TC>(gelu_f(to_f32(pre)))
         : epi == Epilogue::dgelu ? from_f32<TC>(gelu_grad_f(to_f32(aux[i]), to_f32(pre)))
                                  : pre;
}

// The launchers' checks of a GemmCall with its epilogue (kernels/cuda/gemm.h
// says what each takes), every failure one line starting with `who`.
inline void check_gemm_args(const char* who, gpu::Storage st, const GemmCall& c, const void* bias, Epilogue epi,
                            const void* aux) {
  ENGINE_CHECK(c.M >= 0 && c.N >= 0 && c.K >= 0 && c.batch >= 0, who, ": negative size (M ", c.M, ", N ", c.N, ", K ",
               c.K, ", batch ", c.batch, ")");
  ENGINE_CHECK(epi != Epilogue::dgelu_bgrad, who,
               ": no dgelu_bgrad epilogue (cuBLASLt's alone; run dgelu, then bias_grad over C)");
  ENGINE_CHECK(epi != Epilogue::bgrad || (c.ta == Trans::T && c.batch == 1), who,
               ": the bias-gradient epilogue sums op(A)'s rows: A transposed, one batch");
  const bool takes_bias = epilogue_takes_bias(epi);
  ENGINE_CHECK(!takes_bias || bias != nullptr, who, ": the epilogue needs a bias pointer");
  ENGINE_CHECK(epi == Epilogue::none || takes_bias || bias == nullptr, who,
               ": the GELU-gradient and residual epilogues take no bias");
  ENGINE_CHECK(epilogue_takes_aux(epi) == (aux != nullptr), who,
               ": an aux matrix goes with the gelu_aux_bias, bias_residual, dgelu and residual epilogues, and only "
               "with them");
  ENGINE_CHECK(!epilogue_adds_residual(epi) || c.beta == 0.f, who,
               ": the residual epilogue adds aux in place of beta C (beta must be 0)");
  ENGINE_CHECK(!c.out_f32 || (st != gpu::Storage::f32 && c.ta == Trans::T && c.tb == Trans::N), who,
               ": an fp32 C of 16-bit operands is a weight gradient's G^T X (A transposed, B not)");
  ENGINE_CHECK(!c.out_f32 || epi == Epilogue::none || epi == Epilogue::bgrad, who,
               ": an fp32 C of 16-bit operands takes no epilogue but the bias gradient");
}

}  // namespace eng::ENGINE_GPU_NS
