// Self-attention forward/backward, causal (GPT-2) and unmasked (ViT; the
// shape column ends in "full", the name column has no room): the cpu path (kernels/cpu/
// attention.cpp: three steps, the (T, T) probabilities stored) against the
// fused FlashAttention-2 style kernels (kernels/cuda/attention.cu: logsumexp
// saved, probabilities recomputed per tile). The figures use the fused
// kernels' formulas (attention.cu, kTile = 16, n = ceil(T / 16) tiles, P tile
// pairs: n(n+1)/2 causal, n^2 unmasked, so ~2x the flops and K/V reloads):
//   forward:  bytes = 4 B NH HS (2 T + 32 P) + 4 B NH T
//             flops = 4 B NH HS 16^2 P
//   backward: delta:  bytes = 2 B T NH HS 4 + 4 B NH T,            flops = 2 B T NH HS
//             dK/dV:  bytes = 4 B NH HS (4 T + 32 P) + 8 B NH 16 P
//                     flops = 8 B NH HS 16^2 P
//             dQ:     bytes = 4 B NH HS (3 T + 32 P) + 8 B NH T
//                     flops = 6 B NH HS 16^2 P
// The cpu path moves more (kernels/cpu/attention.cpp: 4 (4 B T NH HS) + 4 B NH T^2
// per pass) and, its GEMMs computing the full square for both masks, does
// twice the causal flops (the same as the unmasked ones).
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/attention.h"

namespace eng::bench {

namespace {
struct Dims {
  int64_t B, T, NH, HS;
  gpu::AttentionMask mask;
  bool causal() const { return mask == gpu::AttentionMask::causal; }
  double pairs() const {  // (query, key) tile pairs visited: at or below the diagonal, or all
    const double n = double((T + 15) / 16);
    return causal() ? n * (n + 1) / 2 : n * n;
  }
  double bnh() const { return double(B * NH); }
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " HS=" + std::to_string(HS) + (causal() ? "" : " full");
  }
  cpu::AttentionMask cpu_mask() const { return causal() ? cpu::AttentionMask::causal : cpu::AttentionMask::none; }
};

// q, k, v, out and the forward's saved state on one device: att (cpu) or lse (emu/cuda).
struct AttnState {
  Tensor q, k, v, out, att, lse;
};

AttnState forward_inputs(Device dev, const Dims& d) {
  const Shape s{d.B, d.T, d.NH, d.HS};
  AttnState a{randn(s, 31, dev), randn(s, 32, dev), randn(s, 33, dev), Tensor::empty(s, DType::f32, dev),
              Tensor(),          Tensor()};
  if (dev.type == DeviceType::cpu)
    a.att = Tensor::empty({d.B, d.NH, d.T, d.T}, DType::f32, dev);
  else
    a.lse = Tensor::empty({d.B, d.NH, d.T}, DType::f32, dev);
  return a;
}

void forward(Device dev, const AttnState& a, const Dims& d) {
  if (dev.type == DeviceType::cpu)
    cpu::attention_forward(a.q.data<float>(), a.k.data<float>(), a.v.data<float>(), a.out.data<float>(),
                           a.att.data<float>(), d.B, d.T, d.NH, d.HS, d.cpu_mask());
  else
    ENGINE_GPU_CALL(dev, attention_forward, gpu::Storage::f32, a.q.data_ptr(), a.k.data_ptr(), a.v.data_ptr(),
                    a.out.data_ptr(), a.lse.data<float>(), d.B, d.T, d.NH, d.HS, d.mask, nullptr);
}

Case attention_fwd(const Dims& d) {
  Case c;
  c.name = "attention_fwd";
  c.shape = d.str();
  c.bytes = 4.0 * d.bnh() * double(d.HS) * (2.0 * double(d.T) + 32.0 * d.pairs()) + 4.0 * d.bnh() * double(d.T);
  c.flops = 4.0 * d.bnh() * double(d.HS) * 256.0 * d.pairs();
  c.bound = Bound::compute;
  c.atol = c.rtol = 1e-4;  // a different summation order over T keys
  c.bind = [d](Device dev) {
    AttnState a = forward_inputs(dev, d);
    return Runner{[=] { forward(dev, a, d); }, [=] { return host(a.out); }};
  };
  return c;
}

Case attention_bwd(const Dims& d) {
  Case c;
  c.name = "attention_bwd";
  c.shape = d.str();
  const double bthh = double(d.B * d.T * d.NH * d.HS), bnht = d.bnh() * double(d.T);
  const double tile_bytes = 4.0 * d.bnh() * double(d.HS) * 32.0 * d.pairs();
  c.bytes = (8.0 * bthh + 4.0 * bnht) +  // delta
            (16.0 * bthh + tile_bytes + 8.0 * d.bnh() * 16.0 * d.pairs()) + (12.0 * bthh + tile_bytes + 8.0 * bnht);
  c.flops = 2.0 * bthh + 14.0 * d.bnh() * double(d.HS) * 256.0 * d.pairs();
  c.bound = Bound::compute;
  c.atol = c.rtol = 1e-4;
  c.bind = [d](Device dev) {
    AttnState a = forward_inputs(dev, d);
    forward(dev, a, d);
    const Shape s{d.B, d.T, d.NH, d.HS};
    const Tensor dout = randn(s, 34, dev), dq = Tensor::empty(s, DType::f32, dev);
    const Tensor dk = Tensor::empty(s, DType::f32, dev), dv = Tensor::empty(s, DType::f32, dev);
    const Tensor delta = dev.type == DeviceType::cpu ? Tensor() : Tensor::empty({d.B, d.NH, d.T}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::attention_backward(dout.data<float>(), a.q.data<float>(), a.k.data<float>(), a.v.data<float>(),
                                a.att.data<float>(), dq.data<float>(), dk.data<float>(), dv.data<float>(), d.B, d.T,
                                d.NH, d.HS, d.cpu_mask());
      else
        ENGINE_GPU_CALL(dev, attention_backward, gpu::Storage::f32, dout.data_ptr(), a.q.data_ptr(), a.k.data_ptr(),
                        a.v.data_ptr(), a.out.data_ptr(), a.lse.data<float>(), delta.data<float>(), dq.data_ptr(),
                        dk.data_ptr(), dv.data_ptr(), d.B, d.T, d.NH, d.HS, d.mask, nullptr);
    };
    return Runner{run, [=] { return concat({host(dq), host(dk), host(dv)}); }};
  };
  return c;
}
}  // namespace

// Causal: GPT-2 124M, 12 heads of 64 at T = 1024. Unmasked: ViT-B/16 at
// 224 x 224, 12 heads of 64 over 197 tokens (196 patches + the class token),
// B = 32 for a comparable amount of work. quick: a ragged last tile, B*NH > 1.
std::vector<Case> attention_cases(bool quick) {
  constexpr auto causal = gpu::AttentionMask::causal, none = gpu::AttentionMask::none;
  const Dims gpt = quick ? Dims{1, 37, 2, 16, causal} : Dims{2, 1024, 12, 64, causal};
  const Dims vit = quick ? Dims{1, 37, 2, 16, none} : Dims{32, 197, 12, 64, none};
  return {attention_fwd(gpt), attention_bwd(gpt), attention_fwd(vit), attention_bwd(vit)};
}

}  // namespace eng::bench
