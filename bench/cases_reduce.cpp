// Reduction cases (kernels/cuda/reduce.cu): the ViT's token mean, a sum along
// the middle dim of (B, N, C) = (32, 196, 768) (ViT-B/16 at 224 x 224), and
// the MSE loss over a batch of 4 NERSC-shaped fields (20 x 360 x 720).
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/reduce.h"

namespace eng::bench {

// reduce.cu sum_dim_kernel: bytes = (outer n inner + outer inner) sizeof(T);
// flops = outer n inner.
static Case token_mean(int64_t B, int64_t N, int64_t C) {
  Case c;
  c.name = "token_mean";
  c.shape = std::to_string(B) + "x" + std::to_string(N) + "x" + std::to_string(C) + " dim1";
  c.bytes = 4.0 * double(B * N * C + B * C);
  c.flops = double(B * N * C);
  c.bind = [B, N, C](Device dev) {
    const Tensor x = randn({B, N, C}, 21, dev);
    const Tensor out = Tensor::empty({B, C}, DType::f32, dev);
    const float alpha = 1.0f / float(N);
    auto run = [=] {
      if (dev.type == DeviceType::cpu) {
        cpu::sum_dim(x.data<float>(), out.data<float>(), B, N, C);
        cpu::scale(out.data<float>(), alpha, out.data<float>(), B * C);
      } else {
        ENGINE_GPU_CALL(dev, sum_dim, gpu::Storage::f32, x.data_ptr(), out.data_ptr(), B, N, C, alpha, nullptr);
      }
    };
    return Runner{run, [=] { return host(out); }};
  };
  return c;
}

// reduce.cu mse_forward (two passes: per-block partials, then one block adds
// them): bytes = 2 n sizeof(T) (the partials' 8 KiB left out); flops = 3 n.
static Case mse(int64_t n) {
  Case c;
  c.name = "mse_fwd";
  c.shape = "n=" + std::to_string(n);
  c.bytes = 8.0 * double(n);
  c.flops = 3.0 * double(n);
  c.bind = [n](Device dev) {
    const Tensor p = randn({n}, 22, dev), t = randn({n}, 23, dev);
    const Tensor out = Tensor::empty({1}, DType::f32, dev);
    const Tensor scratch = Tensor::empty({2 * gpu::kMseScratch}, DType::i32, dev);  // doubles
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        *out.data<float>() = float(cpu::mse_forward(p.data<float>(), t.data<float>(), n));
      else
        ENGINE_GPU_CALL(dev, mse_forward, gpu::Storage::f32, p.data_ptr(), t.data_ptr(), n,
                        static_cast<double*>(scratch.data_ptr()), out.data_ptr(), nullptr);
    };
    return Runner{run, [=] { return host(out); }};
  };
  return c;
}

std::vector<Case> reduce_cases(bool quick) {
  if (quick) return {token_mean(3, 17, 33), mse(4099)};
  return {token_mean(32, 196, 768), mse(int64_t(4) * 20 * 360 * 720)};
}

}  // namespace eng::bench
