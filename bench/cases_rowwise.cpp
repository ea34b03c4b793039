// Row-wise cases: layernorm forward/backward (kernels/cuda/layernorm.cu, layernorm_backward.cu) and
// softmax forward/backward (kernels/cuda/softmax.cu), at GPT-2 124M's shapes:
// B*T = 4096 rows of C = 768, and causal attention scores B*NH = 8 blocks of
// (T, T) = (1024, 1024).
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/ladder.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/softmax.h"
#include "kernels/cudnn/cudnn.h"
#if defined(ENGINE_HAVE_CUDA)
#include "engine/gpu_context.h"
#endif

namespace eng::bench {

static constexpr double kEps = 1e-5;

// Inputs of a layernorm on dev; mean/rstd are filled by a forward there.
struct LnInputs {
  Tensor x, w, b, out, mean, rstd;
};
static LnInputs ln_inputs(Device dev, int64_t N, int64_t C) {
  LnInputs in{randn({N, C}, 1, dev),
              randn({C}, 2, dev, 0.2f),
              randn({C}, 3, dev, 0.2f),
              Tensor::empty({N, C}, DType::f32, dev),
              Tensor::empty({N}, DType::f32, dev),
              Tensor::empty({N}, DType::f32, dev)};
  return in;
}
static void ln_forward(Device dev, const LnInputs& t, int64_t N, int64_t C) {
  if (dev.type == DeviceType::cpu)
    cpu::layernorm_forward(t.x.data<float>(), t.w.data<float>(), t.b.data<float>(), t.out.data<float>(),
                           t.mean.data<float>(), t.rstd.data<float>(), N, C, kEps);
  else
    ENGINE_GPU_CALL(dev, layernorm_forward, gpu::Storage::f32, t.x.data_ptr(), t.w.data_ptr(), t.b.data_ptr(),
                    t.out.data_ptr(), t.mean.data<float>(), t.rstd.data<float>(), N, C, kEps, nullptr);
}

static std::string nc(int64_t N, int64_t C) { return "N=" + std::to_string(N) + " C=" + std::to_string(C); }

// cuDNN's layernorm (kernels/cudnn/cudnn_layernorm.cpp, the frontend's
// layernorm / layernorm_backward nodes) as the vendor row of the layernorm
// cases: the same outputs (y, mean, rstd; dx, dw, db), the same bytes and
// flops as ours, so the ratio is one of times; validated against the same cpu
// reference. (PyTorch's own layernorm kernels are not cuDNN's; this is the
// vendor library's.)
static ImplRow cudnn_layernorm_row(int64_t N, int64_t C, bool backward, double bytes, double tol) {
  ImplRow row;
  row.impl = Impl::cudnn;
  row.dtype = "f32";
  row.bound = Bound::memory;
  row.bytes = bytes;
  row.atol = row.rtol = tol;
#if defined(ENGINE_HAVE_CUDA)
  row.bind = [N, C, backward](Device dev) {
    CudnnContext* ctx = &gpu_context(dev.index).cudnn();  // per device, lives for the process
    auto workspace = [&](LayernormPass p) { return Tensor::scratch(cudnn_layernorm_workspace(*ctx, N, C, p), dev); };
    LnInputs t = ln_inputs(dev, N, C);
    const Tensor ws_f = workspace(LayernormPass::forward);
    auto fwd = [=] {
      cudnn_layernorm_forward(*ctx, t.x.data<float>(), t.w.data<float>(), t.b.data<float>(), t.out.data<float>(),
                              t.mean.data<float>(), t.rstd.data<float>(), N, C, kEps, ws_f.data_ptr(), nullptr);
    };
    if (!backward) return Runner{fwd, [=] { return concat({host(t.out), host(t.mean), host(t.rstd)}); }};
    fwd();
    const Tensor ws_b = workspace(LayernormPass::backward);
    const Tensor dout = randn({N, C}, 4, dev), dx = Tensor::empty({N, C}, DType::f32, dev);
    const Tensor dw = Tensor::empty({C}, DType::f32, dev), db = Tensor::empty({C}, DType::f32, dev);
    auto bwd = [=] {
      cudnn_layernorm_backward(*ctx, dout.data<float>(), t.x.data<float>(), t.w.data<float>(), t.mean.data<float>(),
                               t.rstd.data<float>(), dx.data<float>(), dw.data<float>(), db.data<float>(), N, C,
                               ws_b.data_ptr(), nullptr);
    };
    return Runner{bwd, [=] { return concat({host(dx), host(dw), host(db)}); }};
  };
#else
  (void)N, (void)C, (void)backward;
#endif
  return row;
}

// layernorm.cu: forward bytes = N C (2 sizeof(T)) + 2 C sizeof(T) + 8 N, flops ~ 8 N C.
static Case layernorm_fwd(int64_t N, int64_t C) {
  Case c;
  c.name = "layernorm_fwd";
  c.shape = nc(N, C);
  c.bytes = 8.0 * double(N * C) + 8.0 * double(C) + 8.0 * double(N);
  c.flops = 8.0 * double(N * C);
  c.bind = [N, C](Device dev) {
    LnInputs t = ln_inputs(dev, N, C);
    return Runner{[=] { ln_forward(dev, t, N, C); }, [=] { return concat({host(t.out), host(t.mean), host(t.rstd)}); }};
  };
  c.vendor.push_back(cudnn_layernorm_row(N, C, false, c.bytes, c.atol));
  // ladder_layernorm.cu: one thread per row (naive), then a warp per row
  // (warp); the same bytes reach DRAM, in 32-row scattered sectors, then in
  // coalesced ones (docs/kernels/layernorm.md, "The ladder").
  for (const bool warp : {false, true})
    c.ladder.push_back({warp ? "warp" : "naive", c.bytes, c.flops, [N, C, warp](Device dev) {
                          LnInputs t = ln_inputs(dev, N, C);
                          auto run = [=] {
                            if (warp)
                              ENGINE_GPU_CALL(dev, ladder_layernorm_forward_warp, t.x.data<float>(), t.w.data<float>(),
                                              t.b.data<float>(), t.out.data<float>(), t.mean.data<float>(),
                                              t.rstd.data<float>(), N, C, kEps, nullptr);
                            else
                              ENGINE_GPU_CALL(dev, ladder_layernorm_forward_naive, t.x.data<float>(), t.w.data<float>(),
                                              t.b.data<float>(), t.out.data<float>(), t.mean.data<float>(),
                                              t.rstd.data<float>(), N, C, kEps, nullptr);
                          };
                          return Runner{run, [=] { return concat({host(t.out), host(t.mean), host(t.rstd)}); }};
                        }});
  return c;
}

// The residual add fused with the layernorm forward (GPT-2's block
// boundary): residual = x + r, out = layernorm(residual). layernorm.cu:
// fused bytes = N C (4 sizeof(T)) + 2 C sizeof(T) + 8 N, flops ~ 9 N C; the
// ladder's "unfused" rung is elementwise.cu's add then the layernorm forward,
// 5 N C sizeof(T) + 2 C sizeof(T) + 8 N (sum written, then read again).
static Case residual_layernorm_fwd(int64_t N, int64_t C) {
  Case c;
  c.name = "residual_layernorm_fwd";
  c.shape = nc(N, C);
  const double NC = double(N * C);
  c.bytes = 16.0 * NC + 8.0 * double(C) + 8.0 * double(N);
  c.flops = 9.0 * NC;
  auto bind = [N, C](bool fused) {
    return [N, C, fused](Device dev) {
      LnInputs t = ln_inputs(dev, N, C);
      const Tensor r = randn({N, C}, 5, dev), sum = Tensor::empty({N, C}, DType::f32, dev);
      auto run = [=] {
        if (dev.type == DeviceType::cpu) {
          cpu::add(t.x.data<float>(), r.data<float>(), sum.data<float>(), N * C);
          cpu::layernorm_forward(sum.data<float>(), t.w.data<float>(), t.b.data<float>(), t.out.data<float>(),
                                 t.mean.data<float>(), t.rstd.data<float>(), N, C, kEps);
        } else if (fused) {
          ENGINE_GPU_CALL(dev, fused_residual_layernorm_forward, gpu::Storage::f32, t.x.data_ptr(), r.data_ptr(),
                          t.w.data_ptr(), t.b.data_ptr(), sum.data_ptr(), t.out.data_ptr(), t.mean.data<float>(),
                          t.rstd.data<float>(), N, C, kEps, nullptr);
        } else {
          ENGINE_GPU_CALL(dev, add_forward, gpu::Storage::f32, t.x.data_ptr(), r.data_ptr(), sum.data_ptr(), N * C,
                          nullptr);
          ln_forward(dev, LnInputs{sum, t.w, t.b, t.out, t.mean, t.rstd}, N, C);
        }
      };
      return Runner{run, [=] { return concat({host(sum), host(t.out), host(t.mean), host(t.rstd)}); }};
    };
  };
  c.bind = bind(true);
  c.ladder.push_back({"unfused", 20.0 * NC + 8.0 * double(C) + 8.0 * double(N), c.flops, bind(false)});
  return c;
}

// layernorm.cu: backward bytes = N C (3 sizeof(T)) + 8 N + C sizeof(T) + grid 2 C 4,
// grid = layernorm_backward_blocks(N, C) (the warp kernel's or one a row); flops ~ 15 N C.
static Case layernorm_bwd(int64_t N, int64_t C) {
  Case c;
  c.name = "layernorm_bwd";
  c.shape = nc(N, C);
  const double grid = double(gpu::layernorm_backward_blocks(N, C, gpu::Storage::f32));
  c.bytes = 12.0 * double(N * C) + 8.0 * double(N) + 4.0 * double(C) + grid * 8.0 * double(C);
  c.flops = 15.0 * double(N * C);
  // dw/db sum N rows in a different order (per-block partials): looser than elementwise.
  c.atol = 1e-4;
  c.rtol = 1e-4;
  c.bind = [N, C](Device dev) {
    LnInputs t = ln_inputs(dev, N, C);
    ln_forward(dev, t, N, C);
    const Tensor dout = randn({N, C}, 4, dev), dx = Tensor::empty({N, C}, DType::f32, dev);
    const Tensor dw = Tensor::empty({C}, DType::f32, dev), db = Tensor::empty({C}, DType::f32, dev);
    const Tensor scratch = dev.type == DeviceType::cpu
                               ? Tensor()
                               : Tensor::empty({gpu::layernorm_backward_scratch_floats(N, C)}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::layernorm_backward(dout.data<float>(), t.x.data<float>(), t.w.data<float>(), t.mean.data<float>(),
                                t.rstd.data<float>(), dx.data<float>(), dw.data<float>(), db.data<float>(), N, C);
      else
        ENGINE_GPU_CALL(dev, fused_residual_layernorm_backward, gpu::Storage::f32, dout.data_ptr(), t.x.data_ptr(),
                        t.w.data_ptr(), t.mean.data<float>(), t.rstd.data<float>(), nullptr, dx.data_ptr(),
                        dw.data_ptr(), db.data_ptr(), nullptr, gpu::ParamGrads::storage, scratch.data<float>(), N, C,
                        nullptr);
    };
    return Runner{run, [=] { return concat({host(dx), host(dw), host(db)}); }};
  };
  c.vendor.push_back(cudnn_layernorm_row(N, C, true, c.bytes, c.atol));
  // ladder_layernorm.cu: dx by one thread per row (naive), then by a warp
  // per row (warp); dw and db by atomicAdd from every row in both:
  // bytes = 12 N C + 8 N + 4 C + 8 N C (the atomics' read-modify-writes).
  for (const bool warp : {false, true}) {
    c.ladder.push_back(
        {warp ? "warp" : "naive", 20.0 * double(N * C) + 8.0 * double(N) + 4.0 * double(C), c.flops,
         [N, C, warp](Device dev) {
           LnInputs t = ln_inputs(dev, N, C);
           ln_forward(dev, t, N, C);
           const Tensor dout = randn({N, C}, 4, dev), dx = Tensor::empty({N, C}, DType::f32, dev);
           const Tensor dw = Tensor::empty({C}, DType::f32, dev);
           const Tensor db = Tensor::empty({C}, DType::f32, dev);
           auto run = [=] {
             if (warp)
               ENGINE_GPU_CALL(dev, ladder_layernorm_backward_warp, dout.data<float>(), t.x.data<float>(),
                               t.w.data<float>(), t.mean.data<float>(), t.rstd.data<float>(), dx.data<float>(),
                               dw.data<float>(), db.data<float>(), N, C, nullptr);
             else
               ENGINE_GPU_CALL(dev, ladder_layernorm_backward_naive, dout.data<float>(), t.x.data<float>(),
                               t.w.data<float>(), t.mean.data<float>(), t.rstd.data<float>(), dx.data<float>(),
                               dw.data<float>(), db.data<float>(), N, C, nullptr);
           };
           return Runner{run, [=] { return concat({host(dx), host(dw), host(db)}); }};
         }});
    // dw and db: N rows added by atomics in the order they land, one rounding
    // each (the H200 run: 4.7e-4 off at N 4096; the emulator's order is fixed).
    c.ladder.back().atol = c.ladder.back().rtol = 2e-3;
  }
  return c;
}

static void softmax_fwd_on(Device dev, const Tensor& x, const Tensor& y, int64_t rows, int64_t C, bool causal) {
  if (dev.type == DeviceType::cpu)
    cpu::softmax_forward(x.data<float>(), y.data<float>(), rows, C, causal);
  else
    ENGINE_GPU_CALL(dev, softmax_forward, gpu::Storage::f32, x.data_ptr(), y.data_ptr(), rows, C,
                    causal ? gpu::SoftmaxMask::causal : gpu::SoftmaxMask::none, nullptr);
}

static std::string rc(int64_t rows, int64_t C, bool causal) {
  return "rows=" + std::to_string(rows) + " C=" + std::to_string(C) + (causal ? " causal" : "");
}

// cuDNN's softmax (kernels/cudnn/cudnn_softmax.cpp) as the vendor row of the
// unmasked cases, with the same bytes and flops (the same traffic: read x,
// write y; read y and dy, write dx), so the ratio is one of times. It has no
// causal mask: the causal cases say so on their cuDNN row.
static ImplRow cudnn_softmax_row(int64_t rows, int64_t C, bool causal, bool backward) {
  ImplRow row;
  row.impl = Impl::cudnn;
  row.dtype = "f32";
  row.bound = Bound::memory;
  row.bytes = (backward ? 12.0 : 8.0) * double(rows * C);
  row.atol = row.rtol = 1e-5;
  if (causal) {
    row.missing = "cuDNN's softmax has no causal mask";
    return row;
  }
#if defined(ENGINE_HAVE_CUDA)
  row.bind = [rows, C, backward](Device dev) {
    CudnnContext* ctx = &gpu_context(dev.index).cudnn();  // per device, lives for the process
    const Tensor x = randn({rows, C}, 5, dev, 2.f), y = Tensor::empty({rows, C}, DType::f32, dev);
    auto fwd = [=] { cudnn_softmax_forward(*ctx, gpu::Storage::f32, x.data_ptr(), y.data_ptr(), rows, C, nullptr); };
    if (!backward) return Runner{fwd, [=] { return host(y); }};
    fwd();
    const Tensor dy = randn({rows, C}, 6, dev), dx = Tensor::empty({rows, C}, DType::f32, dev);
    auto bwd = [=] {
      cudnn_softmax_backward(*ctx, gpu::Storage::f32, y.data_ptr(), dy.data_ptr(), dx.data_ptr(), rows, C, nullptr);
    };
    return Runner{bwd, [=] { return host(dx); }};
  };
#endif
  return row;
}

// softmax.cu: forward bytes = rows C (2 sizeof(T)) (about half the reads when
// causal; the formula counts them all), flops ~ 5 rows C.
static Case softmax_fwd(int64_t rows, int64_t C, bool causal) {
  Case c;
  c.name = "softmax_fwd";
  c.shape = rc(rows, C, causal);
  c.bytes = 8.0 * double(rows * C);
  c.flops = 5.0 * double(rows * C);
  c.bind = [rows, C, causal](Device dev) {
    const Tensor x = randn({rows, C}, 5, dev, 2.f), y = Tensor::empty({rows, C}, DType::f32, dev);
    return Runner{[=] { softmax_fwd_on(dev, x, y, rows, C, causal); }, [=] { return host(y); }};
  };
  c.vendor.push_back(cudnn_softmax_row(rows, C, causal, false));
  // ladder_softmax.cu: one thread per row, three sweeps (naive); a warp per
  // row (warp); with 16-byte loads (vec). The same bytes, scattered, then
  // coalesced, then in a quarter of the load instructions.
  for (const char* rung : {"naive", "warp", "vec"})
    c.ladder.push_back({rung, c.bytes, c.flops, [rows, C, causal, rung = std::string(rung)](Device dev) {
                          const Tensor x = randn({rows, C}, 5, dev, 2.f);
                          const Tensor y = Tensor::empty({rows, C}, DType::f32, dev);
                          auto run = [=] {
                            const float* xp = x.data<float>();
                            float* yp = y.data<float>();
                            if (rung == "naive")
                              ENGINE_GPU_CALL(dev, ladder_softmax_forward_naive, xp, yp, rows, C, causal, nullptr);
                            else if (rung == "warp")
                              ENGINE_GPU_CALL(dev, ladder_softmax_forward_warp, xp, yp, rows, C, causal, nullptr);
                            else
                              ENGINE_GPU_CALL(dev, ladder_softmax_forward_vec, xp, yp, rows, C, causal, nullptr);
                          };
                          return Runner{run, [=] { return host(y); }};
                        }});
  return c;
}

// softmax.cu: backward bytes = rows C (3 sizeof(T)), flops = 4 rows C.
static Case softmax_bwd(int64_t rows, int64_t C, bool causal) {
  Case c;
  c.name = "softmax_bwd";
  c.shape = rc(rows, C, causal);
  c.bytes = 12.0 * double(rows * C);
  c.flops = 4.0 * double(rows * C);
  c.bind = [rows, C, causal](Device dev) {
    const Tensor x = randn({rows, C}, 5, dev, 2.f), y = Tensor::empty({rows, C}, DType::f32, dev);
    softmax_fwd_on(dev, x, y, rows, C, causal);
    const Tensor dy = randn({rows, C}, 6, dev), dx = Tensor::empty({rows, C}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::softmax_backward(y.data<float>(), dy.data<float>(), dx.data<float>(), rows, C);
      else
        ENGINE_GPU_CALL(dev, softmax_backward, gpu::Storage::f32, y.data_ptr(), dy.data_ptr(), dx.data_ptr(), rows, C,
                        nullptr);
    };
    return Runner{run, [=] { return host(dx); }};
  };
  c.vendor.push_back(cudnn_softmax_row(rows, C, causal, true));
  return c;
}

std::vector<Case> layernorm_softmax_cases(bool quick) {
  // quick: ragged sizes (not multiples of a warp or a 16-byte pack), several T x T blocks.
  const int64_t N = quick ? 37 : 4096, C = quick ? 83 : 768, T = quick ? 45 : 1024, blocks = quick ? 3 : 8;
  return {layernorm_fwd(N, C),
          residual_layernorm_fwd(N, C),
          layernorm_bwd(N, C),
          softmax_fwd(blocks * T, T, true),
          softmax_bwd(blocks * T, T, true),
          softmax_fwd(N, quick ? 101 : 50257 / 8, false),
          softmax_bwd(N, quick ? 101 : 50257 / 8, false)};
}

}  // namespace eng::bench
