// Streaming cases: GELU forward/backward (kernels/cuda/activation.cu) on the
// MLP activation of GPT-2 124M (B*T = 4096 tokens x 4C = 3072), and one fused
// AdamW step (kernels/cuda/adamw.cu) over 16M fp32 parameters.
#include <cmath>
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/adamw.h"

namespace eng::bench {

// activation.cu: bytes = 2 n sizeof(T) forward, 3 n sizeof(T) backward;
// flops ~ 20 n forward, ~30 n backward (tanhf counted as ~10).
static Case gelu(bool backward, int64_t n) {
  Case c;
  c.name = backward ? "gelu_bwd" : "gelu_fwd";
  c.shape = "n=" + std::to_string(n);
  c.bytes = (backward ? 12.0 : 8.0) * double(n);
  c.flops = (backward ? 30.0 : 20.0) * double(n);
  c.bind = [n, backward](Device dev) {
    const Tensor x = randn({n}, 7, dev, 2.f), dout = randn({n}, 8, dev);
    const Tensor out = Tensor::empty({n}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu && backward)
        cpu::gelu_backward(x.data<float>(), dout.data<float>(), out.data<float>(), n);
      else if (dev.type == DeviceType::cpu)
        cpu::gelu_forward(x.data<float>(), out.data<float>(), n);
      else if (backward)
        ENGINE_GPU_CALL(dev, gelu_backward, gpu::Storage::f32, x.data_ptr(), dout.data_ptr(), out.data_ptr(), n,
                        nullptr);
      else
        ENGINE_GPU_CALL(dev, gelu_forward, gpu::Storage::f32, x.data_ptr(), out.data_ptr(), n, nullptr);
    };
    return Runner{run, [=] { return host(out); }};
  };
  return c;
}

// adamw.cu: bytes = 28 n (read p, g, m, v; write p, m, v; fp32); flops ~ 15 n.
// Each run() is one more step on the same state, as in training; the
// validation compares the state after the first step. The GPU path builds the
// one-tensor descriptor once (engine/optim/adamw.cpp builds it every step).
static Case adamw(int64_t n) {
  Case c;
  c.name = "adamw_step";
  c.shape = "n=" + std::to_string(n);
  c.bytes = 28.0 * double(n);
  c.flops = 15.0 * double(n);
  c.bind = [n](Device dev) {
    const double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, t = 10;
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    const Tensor p = randn({n}, 9, dev), g = randn({n}, 10, dev, 0.1f), m = randn({n}, 11, dev, 0.01f);
    const Tensor v = Tensor::uniform({n}, 12, 0.f, 1e-3f, DType::f32, dev);
    Tensor desc;
    if (dev.type != DeviceType::cpu) {
      // The same fp32 constants cpu::adamw_step computes, as the engine's AdamW passes them.
      const gpu::AdamWTensor d{p.data<float>(),
                               g.data<float>(),
                               m.data<float>(),
                               v.data<float>(),
                               nullptr,
                               n,
                               0,
                               float(1.0 - lr * wd),
                               float(lr / bc1),
                               float(std::sqrt(bc2)),
                               0.f};
      desc = Tensor::empty({int64_t(sizeof d / 4)}, DType::i32, dev);
      copy_bytes(desc.data_ptr(), dev, &d, kCPU, sizeof d);
    }
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::adamw_step(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, lr, b1, b2, eps, wd, bc1,
                        bc2);
      else
        ENGINE_GPU_CALL(dev, adamw_multi_tensor, static_cast<const gpu::AdamWTensor*>(desc.data_ptr()), 1,
                        gpu::chunks_of(n), float(b1), float(b2), float(eps), nullptr, nullptr);
    };
    return Runner{run, [=] { return concat({host(p), host(m), host(v)}); }};
  };
  return c;
}

std::vector<Case> gelu_adamw_cases(bool quick) {
  const int64_t n = quick ? 4099 : 4096 * 3072;  // quick: not a multiple of a pack
  return {gelu(false, n), gelu(true, n), adamw(quick ? 5003 : int64_t(16) << 20)};
}

}  // namespace eng::bench
