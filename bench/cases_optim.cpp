// The memory-saving optimizers' kernels beside the fused AdamW (adamw_step,
// cases_pointwise.cpp), at the same 16M fp32 parameters: one 8-bit AdamW step
// (kernels/cuda/adamw8bit.cu) and one Adafactor step on a 4096 x 4096 matrix
// (kernels/cuda/adafactor.cu, seven launches). Each run() is one more step on
// the same state, as in training; validation compares the state after the
// first step. The descriptors are built once here (the engine's optimizers
// build them every step).
#include <cmath>
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/adafactor.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/adamw8bit.h"

namespace eng::bench {

namespace {

template <typename Desc>
Tensor device_descriptor(const Desc& d, Device dev) {
  Tensor t = Tensor::empty({int64_t(sizeof d / 4)}, DType::i32, dev);
  copy_bytes(t.data_ptr(), dev, &d, kCPU, sizeof d);
  return t;
}

// adamw8bit.cu: bytes = 16 n + 16 n / 256; flops ~ 25 n.
Case adamw8bit(int64_t n) {
  Case c;
  c.name = "adamw8bit_step";
  c.shape = "n=" + std::to_string(n);
  c.bytes = 16.0 * double(n) + 16.0 * double(n) / 256.0;
  c.flops = 25.0 * double(n);
  c.bind = [n](Device dev) {
    const double lr = 1e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, t = 10;
    const int64_t blocks = gpu::quant_blocks(n);
    const Tensor p = randn({n}, 9, dev), g = randn({n}, 10, dev, 0.1f);
    // A state as after some steps: random codes, scales of the moments' size.
    const Tensor m8 = Tensor::uniform({n}, 11, 0.f, 255.f, DType::f32).to(DType::u8).to(dev);
    const Tensor v8 = Tensor::uniform({n}, 12, 0.f, 255.f, DType::f32).to(DType::u8).to(dev);
    const Tensor am = Tensor::uniform({blocks}, 13, 0.f, 0.01f, DType::f32, dev);
    const Tensor av = Tensor::uniform({blocks}, 14, 0.f, 1e-3f, DType::f32, dev);
    const auto smap = cpu::dynamic_map(true), umap = cpu::dynamic_map(false);
    std::vector<float> maps(smap.begin(), smap.end());
    maps.insert(maps.end(), umap.begin(), umap.end());
    const Tensor d_maps = Tensor::from_vector(maps, {512}, DType::f32, dev);
    const float decay = float(1.0 - lr * wd), step = float(lr / (1 - std::pow(b1, t)));
    const float sqrt_bc2 = float(std::sqrt(1 - std::pow(b2, t)));
    Tensor desc;
    if (dev.type != DeviceType::cpu)
      desc =
          device_descriptor(gpu::Adam8bitTensor{p.data<float>(), g.data<float>(), m8.data<uint8_t>(), am.data<float>(),
                                                v8.data<uint8_t>(), av.data<float>(), n, 0, decay, step, sqrt_bc2, 0.f},
                            dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::adamw8bit_step(p.data<float>(), g.data<float>(), m8.data<uint8_t>(), am.data<float>(), v8.data<uint8_t>(),
                            av.data<float>(), n, smap.data(), umap.data(),
                            {float(b1), float(b2), float(eps), decay, step, sqrt_bc2});
      else
        ENGINE_GPU_CALL(dev, adamw8bit_multi_tensor, static_cast<const gpu::Adam8bitTensor*>(desc.data_ptr()), 1,
                        blocks, d_maps.data<float>(), float(b1), float(b2), float(eps), nullptr, nullptr);
    };
    return Runner{run, [=] { return concat({host(p), host(am), host(av)}); }};
  };
  return c;
}

// adafactor.cu, one rows x cols matrix: bytes = 28 n + 8 (rows + cols) x 2
// + 8 x 256 per column-partial item (about n / 8); flops ~ 20 n.
Case adafactor(int64_t rows, int64_t cols) {
  Case c;
  const int64_t n = rows * cols, parts = gpu::adafactor_parts(1, rows, cols);
  c.name = "adafactor_step";
  c.shape = "R=" + std::to_string(rows) + " C=" + std::to_string(cols);
  c.bytes = 28.0 * double(n) + 16.0 * double(rows + cols) + 8.0 * double(gpu::kAdafactorTile * parts);
  c.flops = 20.0 * double(n);
  c.atol = 1e-6, c.rtol = 1e-4;  // fp32 trees against the reference's double sums
  c.bind = [rows, cols, n, parts](Device dev) {
    const Tensor p = randn({n}, 9, dev), g = randn({n}, 10, dev, 0.1f);
    const Tensor row = Tensor::uniform({rows}, 11, 1e-3f, 2e-3f, DType::f32, dev);
    const Tensor col = Tensor::uniform({cols}, 12, 1e-3f, 2e-3f, DType::f32, dev);
    const float beta2t = float(1.0 - std::pow(10.0, -0.8)), lr = 1e-3f, wd = 0.1f;
    Tensor desc, stats, partials;
    if (dev.type != DeviceType::cpu) {
      stats = Tensor::zeros({3}, DType::f32, dev);
      partials = Tensor::zeros({gpu::adafactor_scratch(gpu::chunks_of(n), parts)}, DType::f32, dev);
      gpu::AdafactorTensor d{};
      d.param = p.data<float>(), d.grad = g.data<float>(), d.row = row.data<float>(), d.col = col.data<float>();
      d.stats = stats.data<float>(), d.batch = 1, d.rows = rows, d.cols = cols, d.n = n;
      d.beta2t = beta2t, d.rel_lr = lr, d.weight_decay = wd;
      desc = device_descriptor(d, dev);
    }
    auto run = [=] {
      if (dev.type == DeviceType::cpu) {
        cpu::AdafactorScalars s{beta2t, lr};
        s.weight_decay = wd;
        cpu::adafactor_step(p.data<float>(), g.data<float>(), row.data<float>(), col.data<float>(), nullptr, nullptr, 1,
                            rows, cols, s);
      } else {
        ENGINE_GPU_CALL(dev, adafactor_multi_tensor, static_cast<const gpu::AdafactorTensor*>(desc.data_ptr()), 1,
                        gpu::chunks_of(n), rows, gpu::adafactor_tiles(1, cols), parts,
                        gpu::AdafactorConsts{1e-30f, 1e-3f, 1.f, 0.f}, partials.data<float>(), nullptr, nullptr);
      }
    };
    return Runner{run, [=] { return concat({host(p), host(row), host(col)}); }};
  };
  return c;
}

}  // namespace

std::vector<Case> optimizer_cases(bool quick) {
  if (quick) return {adamw8bit(5003), adafactor(61, 83)};  // partial blocks and chunks
  return {adamw8bit(int64_t(16) << 20), adafactor(4096, 4096)};
}

}  // namespace eng::bench
