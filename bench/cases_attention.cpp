// Causal self-attention forward/backward: the cpu path (kernels/cpu/
// attention.cpp: three steps, the (T, T) probabilities stored) against the
// fused FlashAttention-2 style kernels (kernels/cuda/attention.cu: logsumexp
// saved, probabilities recomputed per tile). The figures use the fused
// kernels' formulas (attention.cu, kTile = 16, n = ceil(T / 16) tiles):
//   forward:  bytes = 4 B NH HS (2 T + 16 n (n+1)) + 4 B NH T
//             flops = 4 B NH HS 16^2 n(n+1)/2
//   backward: delta:  bytes = 2 B T NH HS 4 + 4 B NH T,            flops = 2 B T NH HS
//             dK/dV:  bytes = 4 B NH HS (4 T + 16 n (n+1)) + 8 B NH 16 n(n+1)/2
//                     flops = 8 B NH HS 16^2 n(n+1)/2
//             dQ:     bytes = 4 B NH HS (3 T + 16 n (n+1)) + 8 B NH T
//                     flops = 6 B NH HS 16^2 n(n+1)/2
// The cpu path moves more (kernels/cpu/attention.cpp: 4 (4 B T NH HS) + 4 B NH T^2
// per pass) and, its GEMMs computing the masked half too, does twice the flops.
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/attention.h"

namespace eng::bench {

namespace {
struct Dims {
  int64_t B, T, NH, HS;
  double tri() const {  // n(n+1)/2 tile pairs at or below the diagonal
    const double n = double((T + 15) / 16);
    return n * (n + 1) / 2;
  }
  double bnh() const { return double(B * NH); }
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " HS=" + std::to_string(HS);
  }
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
                           a.att.data<float>(), d.B, d.T, d.NH, d.HS);
  else
    ENGINE_GPU_CALL(dev, attention_forward, gpu::Storage::f32, a.q.data_ptr(), a.k.data_ptr(), a.v.data_ptr(),
                    a.out.data_ptr(), a.lse.data<float>(), d.B, d.T, d.NH, d.HS, nullptr);
}

Case attention_fwd(const Dims& d) {
  Case c;
  c.name = "attention_fwd";
  c.shape = d.str();
  c.bytes = 4.0 * d.bnh() * double(d.HS) * (2.0 * double(d.T) + 32.0 * d.tri()) + 4.0 * d.bnh() * double(d.T);
  c.flops = 4.0 * d.bnh() * double(d.HS) * 256.0 * d.tri();
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
  const double tile_bytes = 4.0 * d.bnh() * double(d.HS) * 32.0 * d.tri();
  c.bytes = (8.0 * bthh + 4.0 * bnht) +  // delta
            (16.0 * bthh + tile_bytes + 8.0 * d.bnh() * 16.0 * d.tri()) + (12.0 * bthh + tile_bytes + 8.0 * bnht);
  c.flops = 2.0 * bthh + 14.0 * d.bnh() * double(d.HS) * 256.0 * d.tri();
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
                                d.NH, d.HS);
      else
        ENGINE_GPU_CALL(dev, attention_backward, gpu::Storage::f32, dout.data_ptr(), a.q.data_ptr(), a.k.data_ptr(),
                        a.v.data_ptr(), a.out.data_ptr(), a.lse.data<float>(), delta.data<float>(), dq.data_ptr(),
                        dk.data_ptr(), dv.data_ptr(), d.B, d.T, d.NH, d.HS, nullptr);
    };
    return Runner{run, [=] { return concat({host(dq), host(dk), host(dv)}); }};
  };
  return c;
}
}  // namespace

// GPT-2 124M: 12 heads of 64 at T = 1024; quick: a ragged last tile, B*NH > 1.
std::vector<Case> attention_cases(bool quick) {
  const Dims d = quick ? Dims{1, 37, 2, 16} : Dims{2, 1024, 12, 64};
  return {attention_fwd(d), attention_bwd(d)};
}

}  // namespace eng::bench
