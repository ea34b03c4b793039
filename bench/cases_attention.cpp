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
// with 4 = sizeof(T) of the q/k/v/out terms in f32 (2 in bf16/f16: the
// cases come in all three storage types; lse and delta stay fp32).
// The cpu path moves more (kernels/cpu/attention.cpp: 4 (4 B T NH HS) + 4 B NH T^2
// per pass); under the causal mask its GEMMs run on 32-row blocks that skip
// most of the masked triangle ((n + 1) / (2 n) of the square for n blocks),
// so its causal flops sit between the fused kernels' and the unmasked ones.
// In bf16/f16 the cpu
// reference is f32 math on the rounded inputs.
// cuDNN (kernels/cudnn/, bf16 and f16 only: it has no fp32 fused attention)
// is the vendor row: its tiling is not ours to know, so its bytes are the
// minimum traffic, sizeof(T) (4 B T NH HS) + 4 B NH T forward (q, k, v read,
// out written, stats) and sizeof(T) (8 B T NH HS) + 4 B NH T backward (q, k,
// v, out, dout read, dq, dk, dv written, stats), and the flops are ours, so
// the printed ours/cudnn ratio is a ratio of times.
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/ladder.h"
#include "kernels/cudnn/cudnn.h"
#if defined(ENGINE_HAVE_CUDA)
#include "engine/gpu_context.h"
#endif

namespace eng::bench {

namespace {
struct Dims {
  int64_t B, T, NH, HS;
  gpu::AttentionMask mask;
  DType st = DType::f32;
  bool causal() const { return mask == gpu::AttentionMask::causal; }
  double pairs() const {  // (query, key) tile pairs visited: at or below the diagonal, or all
    const double n = double((T + 15) / 16);
    return causal() ? n * (n + 1) / 2 : n * n;
  }
  double bnh() const { return double(B * NH); }
  double elem() const { return double(dtype_size(st)); }
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " HS=" + std::to_string(HS) + (causal() ? "" : " full");
  }
  cpu::AttentionMask cpu_mask() const { return causal() ? cpu::AttentionMask::causal : cpu::AttentionMask::none; }
  SdpaShape sdpa() const {
    SdpaShape s;
    s.B = B, s.T = T, s.NH = NH, s.HS = HS, s.st = gpu::storage_of(st), s.mask = mask;
    return s;
  }
};

// A seeded input rounded to the case's storage: f32 values on the cpu (the
// reference's input), the storage type on a GPU.
Tensor input(const Dims& d, uint64_t seed, Device dev) {
  const Tensor x = Tensor::randn({d.B, d.T, d.NH, d.HS}, seed, 1.f).to(d.st);
  return dev.type == DeviceType::cpu ? x.to(DType::f32) : x.to(dev);
}
Tensor output(const Dims& d, Device dev) {
  return Tensor::empty({d.B, d.T, d.NH, d.HS}, dev.type == DeviceType::cpu ? DType::f32 : d.st, dev);
}

// q, k, v, out and the forward's saved state on one device: att (cpu) or lse (emu/cuda/cudnn).
struct AttnState {
  Tensor q, k, v, out, att, lse;
};

AttnState forward_inputs(Device dev, const Dims& d) {
  AttnState a{input(d, 31, dev), input(d, 32, dev), input(d, 33, dev), output(d, dev), Tensor(), Tensor()};
  if (dev.type == DeviceType::cpu)
    a.att = Tensor::empty({d.B, d.NH, d.T, d.T}, DType::f32, dev);
  else
    a.lse = Tensor::empty({d.B, d.NH, d.T}, DType::f32, dev);
  return a;
}

void forward(Device dev, const AttnState& a, const Dims& d) {
  if (dev.type == DeviceType::cpu)
    cpu::attention_forward(a.q.data<float>(), a.k.data<float>(), a.v.data<float>(), a.out.data<float>(),
                           a.att.data<float>(), cpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0}, d.cpu_mask());
  else
    ENGINE_GPU_CALL(dev, attention_forward, gpu::storage_of(d.st), a.q.data_ptr(), a.k.data_ptr(), a.v.data_ptr(),
                    a.out.data_ptr(), a.lse.data<float>(), gpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0}, d.mask,
                    nullptr);
}

// The tolerances: f32 a different summation order; bf16/f16 the forward one
// rounding of the output (2x tests/kernels/emu_check.h's), the backward 4x
// that (tests/kernels/test_attention_emu.cpp says why).
double tol(const Dims& d, bool backward) {
  const double base = d.st == DType::bf16 ? 1.6e-2 : d.st == DType::f16 ? 2e-3 : 1e-4;
  return backward && d.st != DType::f32 ? 4 * base : base;
}

// The cuDNN row of a case: missing for f32, else bind runs cuDNN on the GPU.
ImplRow cudnn_row(const Dims& d, bool backward) {
  ImplRow row;
  row.impl = Impl::cudnn;
  row.dtype = dtype_name(d.st);
  row.bound = Bound::compute_bf16_fp16;
  row.atol = row.rtol = tol(d, backward);
  const double bthh = double(d.B * d.T * d.NH * d.HS);
  row.bytes = d.elem() * (backward ? 8.0 : 4.0) * bthh + 4.0 * d.bnh() * double(d.T);
  if (d.st == DType::f32) {
    row.missing = "cuDNN has no fp32 fused attention (see the bf16 and f16 rows)";
    return row;
  }
#if defined(ENGINE_HAVE_CUDA)
  row.bind = [d, backward](Device dev) {
    CudnnContext* ctx = &gpu_context(dev.index).cudnn();  // per device, lives for the process
    const SdpaShape s = d.sdpa();
    const Tensor ws_f = Tensor::scratch(cudnn_sdpa_workspace(*ctx, s, SdpaPass::forward), dev);
    AttnState a = forward_inputs(dev, d);
    auto fwd = [=] {
      cudnn_sdpa_forward(*ctx, s, a.q.data_ptr(), a.k.data_ptr(), a.v.data_ptr(), a.out.data_ptr(), a.lse.data<float>(),
                         ws_f.data_ptr(), nullptr);
    };
    if (!backward) return Runner{fwd, [=] { return host(a.out); }};
    fwd();
    const Tensor ws_b = Tensor::scratch(cudnn_sdpa_workspace(*ctx, s, SdpaPass::backward), dev);
    const Tensor dout = input(d, 34, dev), dq = output(d, dev), dk = output(d, dev), dv = output(d, dev);
    auto bwd = [=] {
      cudnn_sdpa_backward(*ctx, s, a.q.data_ptr(), a.k.data_ptr(), a.v.data_ptr(), a.out.data_ptr(), dout.data_ptr(),
                          a.lse.data<float>(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), ws_b.data_ptr(), nullptr);
    };
    return Runner{bwd, [=] { return concat({host(dq), host(dk), host(dv)}); }};
  };
#endif
  return row;
}

Case attention_fwd(const Dims& d) {
  Case c;
  c.name = "attention_fwd";
  c.shape = d.str();
  c.dtype = dtype_name(d.st);
  c.bytes = d.elem() * d.bnh() * double(d.HS) * (2.0 * double(d.T) + 32.0 * d.pairs()) + 4.0 * d.bnh() * double(d.T);
  c.flops = 4.0 * d.bnh() * double(d.HS) * 256.0 * d.pairs();
  c.bound = Bound::compute;
  c.atol = c.rtol = tol(d, false);
  c.bind = [d](Device dev) {
    AttnState a = forward_inputs(dev, d);
    return Runner{[=] { forward(dev, a, d); }, [=] { return host(a.out); }};
  };
  c.vendor.push_back(cudnn_row(d, false));
  // docs/kernels/attention.md's step 0 (ladder_attention.cu), f32: S written,
  // read and written by the softmax, read by P v: bytes = 4 (4 B NH T^2 + 4 B
  // T NH HS), flops = 4 B NH T^2 HS (the full square, masked half included).
  if (d.st == DType::f32) {
    const double T2 = d.bnh() * double(d.T) * double(d.T), bthh = double(d.B * d.T * d.NH * d.HS);
    c.ladder.push_back({"naive", 4.0 * (4.0 * T2 + 4.0 * bthh), 4.0 * T2 * double(d.HS), [d](Device dev) {
                          AttnState a = forward_inputs(dev, d);
                          const Tensor scores = Tensor::empty({d.B, d.NH, d.T, d.T}, DType::f32, dev);
                          auto run = [=] {
                            ENGINE_GPU_CALL(dev, ladder_attention_forward_naive, a.q.data<float>(), a.k.data<float>(),
                                            a.v.data<float>(), a.out.data<float>(), scores.data<float>(),
                                            gpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0}, d.mask, nullptr);
                          };
                          return Runner{run, [=] { return host(a.out); }};
                        }});
  }
  // The tensor-core rung (kernels/cuda/attention_mma.cu), bf16/f16, head
  // sizes 64 and 128: 64 x 64 tiles, n = ceil(T / 64), each query block
  // reads its K and V tiles: bytes = elem B NH HS (2 T + 2 64 pairs) + 4 B NH T,
  // flops = 4 B NH HS 64^2 pairs (the tiles visited), pairs n(n+1)/2 causal, n^2 not.
  if (d.st != DType::f32 && (d.HS == 64 || d.HS == 128)) {
    const double n = double((d.T + 63) / 64), pairs = d.causal() ? n * (n + 1) / 2 : n * n;
    const double bytes =
        d.elem() * d.bnh() * double(d.HS) * (2.0 * double(d.T) + 128.0 * pairs) + 4.0 * d.bnh() * double(d.T);
    c.ladder.push_back(mma_rung(bytes, 4.0 * d.bnh() * double(d.HS) * 4096.0 * pairs, [d](Device dev) {
      AttnState a = forward_inputs(dev, d);
      auto run = [=] {
        ENGINE_GPU_CALL(dev, attention_forward_mma, gpu::storage_of(d.st), a.q.data_ptr(), a.k.data_ptr(),
                        a.v.data_ptr(), a.out.data_ptr(), a.lse.data<float>(),
                        gpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0}, d.mask, nullptr);
      };
      return Runner{run, [=] { return host(a.out); }};
    }));
  }
  return c;
}

Case attention_bwd(const Dims& d) {
  Case c;
  c.name = "attention_bwd";
  c.shape = d.str();
  c.dtype = dtype_name(d.st);
  const double bthh = double(d.B * d.T * d.NH * d.HS), bnht = d.bnh() * double(d.T), e = d.elem();
  const double tile_bytes = e * d.bnh() * double(d.HS) * 32.0 * d.pairs();
  c.bytes = (2.0 * e * bthh + 4.0 * bnht) +  // delta
            (4.0 * e * bthh + tile_bytes + 8.0 * d.bnh() * 16.0 * d.pairs()) +
            (3.0 * e * bthh + tile_bytes + 8.0 * bnht);
  c.flops = 2.0 * bthh + 14.0 * d.bnh() * double(d.HS) * 256.0 * d.pairs();
  c.bound = Bound::compute;
  c.atol = c.rtol = tol(d, true);
  c.bind = [d](Device dev) {
    AttnState a = forward_inputs(dev, d);
    forward(dev, a, d);
    const Tensor dout = input(d, 34, dev), dq = output(d, dev), dk = output(d, dev), dv = output(d, dev);
    const Tensor delta = dev.type == DeviceType::cpu ? Tensor() : Tensor::empty({d.B, d.NH, d.T}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::attention_backward(dout.data<float>(), a.q.data<float>(), a.k.data<float>(), a.v.data<float>(),
                                a.att.data<float>(), dq.data<float>(), dk.data<float>(), dv.data<float>(),
                                cpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0}, d.cpu_mask());
      else
        ENGINE_GPU_CALL(dev, attention_backward, gpu::storage_of(d.st), dout.data_ptr(), a.q.data_ptr(), a.k.data_ptr(),
                        a.v.data_ptr(), a.out.data_ptr(), a.lse.data<float>(), delta.data<float>(), dq.data_ptr(),
                        dk.data_ptr(), dv.data_ptr(), gpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0}, d.mask,
                        nullptr);
    };
    return Runner{run, [=] { return concat({host(dq), host(dk), host(dv)}); }};
  };
  c.vendor.push_back(cudnn_row(d, true));
  // The tensor-core rung (kernels/cuda/attention_mma_backward.cu), bf16/f16,
  // head sizes 64 and 128, from our forward's out and lse. 64 x 64 tile
  // pairs P (n = ceil(T / 64)): the dK/dV kernel reads Q and dO per key
  // tile, the dQ kernel K and V per query tile: bytes = (2 e X + 4 B NH T)
  // + (4 e X + 128 e B NH HS P + 512 B NH P) + (3 e X + 128 e B NH HS P + 8 B NH T),
  // X = B T NH HS; flops = 2 X + 14 B NH HS 64^2 P (S and dP twice, dV, dK, dQ).
  if (d.st != DType::f32 && (d.HS == 64 || d.HS == 128)) {
    const double n = double((d.T + 63) / 64), pairs = d.causal() ? n * (n + 1) / 2 : n * n;
    const double tiles = 128.0 * e * d.bnh() * double(d.HS) * pairs;
    const double bytes = (2.0 * e * bthh + 4.0 * bnht) + (4.0 * e * bthh + tiles + 512.0 * d.bnh() * pairs) +
                         (3.0 * e * bthh + tiles + 8.0 * bnht);
    c.ladder.push_back(mma_rung(bytes, 2.0 * bthh + 14.0 * d.bnh() * double(d.HS) * 4096.0 * pairs, [d](Device dev) {
      AttnState a = forward_inputs(dev, d);
      forward(dev, a, d);
      const Tensor dout = input(d, 34, dev), dq = output(d, dev), dk = output(d, dev), dv = output(d, dev),
                   delta = Tensor::empty({d.B, d.NH, d.T}, DType::f32, dev);
      auto run = [=] {
        ENGINE_GPU_CALL(dev, attention_backward_mma, gpu::storage_of(d.st), dout.data_ptr(), a.q.data_ptr(),
                        a.k.data_ptr(), a.v.data_ptr(), a.out.data_ptr(), a.lse.data<float>(), delta.data<float>(),
                        dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), gpu::AttentionDims{d.B, d.T, d.T, d.NH, d.HS, 0},
                        d.mask, nullptr);
      };
      return Runner{run, [=] { return concat({host(dq), host(dk), host(dv)}); }};
    }));
  }
  return c;
}
}  // namespace

// Causal: GPT-2 124M, 12 heads of 64 at T = 1024. Unmasked: ViT-B/16 at
// 224 x 224, 12 heads of 64 over 197 tokens (196 patches + the class token),
// B = 32 for a comparable amount of work. quick: a ragged last tile, B*NH > 1,
// head size 16 in f32 and 64 in bf16/f16 (the tensor-core rung's smallest).
// Each in f32 (what ours runs at O0/O1) and in bf16 and f16 (O2/O3, and
// where cuDNN and the tensor-core rung have their rows).
std::vector<Case> attention_cases(bool quick) {
  constexpr auto causal = gpu::AttentionMask::causal, none = gpu::AttentionMask::none;
  std::vector<Case> cases;
  for (DType st : {DType::f32, DType::bf16, DType::f16}) {
    const int64_t qhs = st == DType::f32 ? 16 : 64;
    const Dims gpt = quick ? Dims{1, 37, 2, qhs, causal, st} : Dims{2, 1024, 12, 64, causal, st};
    const Dims vit = quick ? Dims{1, 37, 2, qhs, none, st} : Dims{32, 197, 12, 64, none, st};
    for (const Dims& d : {gpt, vit}) {
      cases.push_back(attention_fwd(d));
      cases.push_back(attention_bwd(d));
    }
  }
  return cases;
}

}  // namespace eng::bench
