// The attention ladder's step 0 (docs/kernels/attention.md, "Step 0"): three
// kernels through global memory, as the cpu reference computes it. The
// shipped kernel is kernels/cuda/attention.cu (one fused FlashAttention-2
// pass that never writes the T x T scores). f32; q, k, v, out (B, T, NH, HS),
// scores (B, NH, T, T). Reference: kernels/cpu/attention.cpp.
#include <cmath>

#include "kernels/cuda/ladder.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kThreads = 256;

// 1. S[b, h, i, j] = scale q_i . k_j, -inf where the mask hides key j. One
//    thread per score: bytes ~ 4 B NH T^2 (S written) + the q and k reads
//    (4 B NH T^2 2 HS requested, mostly from cache); flops = 2 B NH T^2 HS.
__global__ void scores_kernel(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ s,
                              gpu::AttentionDims d, bool causal, float scale) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= d.B * d.NH * d.Tq * d.Tk) return;
  const int64_t j = idx % d.Tk, i = idx / d.Tk % d.Tq, h = idx / (d.Tk * d.Tq) % d.NH, b = idx / (d.Tk * d.Tq * d.NH);
  if (causal && j > d.q_offset + i) {
    s[idx] = -INFINITY;
    return;
  }
  const float* qi = q + ((b * d.Tq + i) * d.NH + h) * d.HS;
  const float* kj = k + ((b * d.Tk + j) * d.NH + h) * d.HS;
  float acc = 0.f;
  for (int64_t c = 0; c < d.HS; ++c) acc += qi[c] * kj[c];
  s[idx] = acc * scale;
}

// 3. out[b, i, h, :] = sum_j P[b, h, i, j] v[b, j, h, :]. One thread per
//    output element: bytes ~ 4 B NH T^2 (P read) + 4 B T NH HS (out);
//    flops = 2 B NH T^2 HS.
__global__ void pv_kernel(const float* __restrict__ p, const float* __restrict__ v, float* __restrict__ out,
                          gpu::AttentionDims d) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= d.B * d.Tq * d.NH * d.HS) return;
  const int64_t c = idx % d.HS, h = idx / d.HS % d.NH, i = idx / (d.HS * d.NH) % d.Tq, b = idx / (d.HS * d.NH * d.Tq);
  const float* pi = p + ((b * d.NH + h) * d.Tq + i) * d.Tk;
  float acc = 0.f;
  for (int64_t j = 0; j < d.Tk; ++j) acc += pi[j] * v[((b * d.Tk + j) * d.NH + h) * d.HS + c];
  out[idx] = acc;
}
}  // namespace

void ladder_attention_forward_naive(const float* q, const float* k, const float* v, float* out, float* scores,
                                    const gpu::AttentionDims& d, gpu::AttentionMask mask, void* stream) {
  if (d.B == 0 || d.Tq == 0 || d.NH == 0 || d.HS == 0) return;
  ENGINE_CHECK(d.Tk > 0, "ladder_attention_forward_naive: no keys (Tk = 0): every query's softmax would be empty");
  const auto s = as_stream(stream);
  const bool causal = mask == gpu::AttentionMask::causal;
  const int64_t n_scores = d.B * d.NH * d.Tq * d.Tk, n_out = d.B * d.Tq * d.NH * d.HS;
  LAUNCH_KERNEL(scores_kernel, ceil_div(n_scores, kThreads), kThreads, 0, s, q, k, scores, d, causal,
                float(1.0 / std::sqrt(double(d.HS))));
  // 2. The naive softmax over each row of S in place: masked scores are -inf
  //    and come out 0 (every row sees at least key 0), so it needs no mask.
  ladder_softmax_forward_naive(scores, scores, d.B * d.NH * d.Tq, d.Tk, false, stream);
  LAUNCH_KERNEL(pv_kernel, ceil_div(n_out, kThreads), kThreads, 0, s, scores, v, out, d);
}

}  // namespace eng::ENGINE_GPU_NS
