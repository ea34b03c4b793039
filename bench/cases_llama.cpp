// The Llama block's kernels: rmsnorm forward/backward (kernels/cuda/
// layernorm.cu's kRms kernels), swiglu forward/backward (swiglu.cu) and the
// rotary embedding turned in place on a packed qkv (rope.cu), at Llama 3.2
// 1B's shapes (C 2048, 8192 hidden, 32 query and 8 K/V heads of 64) for B*T
// = 4096 tokens. Bytes and flops: each kernel's formula for f32 storage.
#include <string>

#include "bench/cases.h"
#include "engine/ops.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"

namespace eng::bench {

static constexpr double kEps = 1e-5;

static std::string nc(const char* n, int64_t N, const char* c, int64_t C) {
  return std::string(n) + "=" + std::to_string(N) + " " + c + "=" + std::to_string(C);
}

// rmsnorm's inputs and its forward into out and rstd.
struct RmsInputs {
  Tensor x, w, out, rstd;
};
static RmsInputs rms_inputs(Device dev, int64_t N, int64_t C) {
  return {randn({N, C}, 1, dev), randn({C}, 2, dev, 0.2f), Tensor::empty({N, C}, DType::f32, dev),
          Tensor::empty({N}, DType::f32, dev)};
}
static void rms_forward(Device dev, const RmsInputs& t, int64_t N, int64_t C) {
  if (dev.type == DeviceType::cpu)
    cpu::rmsnorm_forward(t.x.data<float>(), t.w.data<float>(), t.out.data<float>(), t.rstd.data<float>(), N, C, kEps);
  else
    ENGINE_GPU_CALL(dev, rmsnorm_forward, gpu::Storage::f32, t.x.data_ptr(), t.w.data_ptr(), t.out.data_ptr(),
                    t.rstd.data<float>(), N, C, kEps, nullptr);
}

// layernorm.h: forward bytes = 8 N C + 4 C + 4 N, flops ~ 4 N C.
static Case rmsnorm_fwd(int64_t N, int64_t C) {
  Case c;
  c.name = "rmsnorm_fwd";
  c.shape = nc("N", N, "C", C);
  c.bytes = 8.0 * double(N * C) + 4.0 * double(C) + 4.0 * double(N);
  c.flops = 4.0 * double(N * C);
  c.bind = [N, C](Device dev) {
    RmsInputs t = rms_inputs(dev, N, C);
    return Runner{[=] { rms_forward(dev, t, N, C); }, [=] { return concat({host(t.out), host(t.rstd)}); }};
  };
  return c;
}

// layernorm.h: backward bytes = 12 N C + 4 N + 8 C + blocks 8 C, flops ~ 9 N C.
static Case rmsnorm_bwd(int64_t N, int64_t C) {
  Case c;
  c.name = "rmsnorm_bwd";
  c.shape = nc("N", N, "C", C);
  const double blocks = double(gpu::layernorm_backward_blocks(N, C, gpu::Storage::f32));
  c.bytes = 12.0 * double(N * C) + 4.0 * double(N) + 8.0 * double(C) + blocks * 8.0 * double(C);
  c.flops = 9.0 * double(N * C);
  c.atol = c.rtol = 1e-4;  // dw sums N rows in another order (per-block partials)
  c.bind = [N, C](Device dev) {
    RmsInputs t = rms_inputs(dev, N, C);
    rms_forward(dev, t, N, C);
    const Tensor dout = randn({N, C}, 4, dev), dx = Tensor::empty({N, C}, DType::f32, dev);
    const Tensor dw = Tensor::empty({C}, DType::f32, dev);
    const Tensor scratch = dev.type == DeviceType::cpu
                               ? Tensor()
                               : Tensor::empty({gpu::layernorm_backward_scratch_floats(N, C)}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::rmsnorm_backward(dout.data<float>(), t.x.data<float>(), t.w.data<float>(), t.rstd.data<float>(),
                              dx.data<float>(), dw.data<float>(), N, C);
      else
        ENGINE_GPU_CALL(dev, fused_residual_rmsnorm_backward, gpu::Storage::f32, dout.data_ptr(), t.x.data_ptr(),
                        t.w.data_ptr(), t.rstd.data<float>(), nullptr, dx.data_ptr(), dw.data_ptr(),
                        gpu::ParamGrads::storage, scratch.data<float>(), N, C, nullptr);
    };
    return Runner{run, [=] { return concat({host(dx), host(dw)}); }};
  };
  return c;
}

// swiglu.h: forward bytes = 12 N H, flops ~ 8 N H; backward 20 N H, ~14 N H.
static Case swiglu_case(int64_t N, int64_t H, bool backward) {
  Case c;
  c.name = backward ? "swiglu_bwd" : "swiglu_fwd";
  c.shape = nc("N", N, "H", H);
  c.bytes = (backward ? 20.0 : 12.0) * double(N * H);
  c.flops = (backward ? 14.0 : 8.0) * double(N * H);
  c.bind = [N, H, backward](Device dev) {
    const Tensor gu = randn({N, 2 * H}, 5, dev, 2.f), dout = randn({N, H}, 6, dev);
    const Tensor out = Tensor::empty({N, backward ? 2 * H : H}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu && backward)
        cpu::swiglu_backward(gu.data<float>(), dout.data<float>(), out.data<float>(), N, H);
      else if (dev.type == DeviceType::cpu)
        cpu::swiglu_forward(gu.data<float>(), out.data<float>(), N, H);
      else if (backward)
        ENGINE_GPU_CALL(dev, swiglu_backward, gpu::Storage::f32, gu.data_ptr(), dout.data_ptr(), out.data_ptr(), N, H,
                        nullptr);
      else
        ENGINE_GPU_CALL(dev, swiglu_forward, gpu::Storage::f32, gu.data_ptr(), out.data_ptr(), N, H, nullptr);
    };
    return Runner{run, [=] { return host(out); }};
  };
  return c;
}

// rope.h: in place on the q and k heads of a packed qkv, bytes = 2 B T
// (NH + NKV) HS 4 + T HS 4, flops = 3 B T (NH + NKV) HS. Each run turns
// the buffer once more (the output checked is the first run's: run() is
// timed after one validating call on fresh inputs).
static Case rope_case(int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS) {
  Case c;
  c.name = "rope_fwd";
  c.shape = "B=" + std::to_string(B) + " T=" + std::to_string(T) + " heads=" + std::to_string(NH) + "+" +
            std::to_string(NKV) + " HS=" + std::to_string(HS);
  const double rot = double(B * T * (NH + NKV) * HS);
  c.bytes = 8.0 * rot + 4.0 * double(T * HS);
  c.flops = 3.0 * rot;
  c.bind = [=](Device dev) {
    const int64_t W = (NH + 2 * NKV) * HS;
    const Tensor qkv = randn({B, T, W}, 7, dev), table = rope_table(T, HS, RopeOptions{500000.0}, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::rope_apply(qkv.data<float>(), qkv.data<float>(), table.data<float>(),
                        cpu::RopeDims{B, T, HS, W, NH + NKV, 0, 0}, +1);
      else
        ENGINE_GPU_CALL(dev, rope_apply, gpu::Storage::f32, qkv.data_ptr(), qkv.data_ptr(), table.data<float>(),
                        gpu::RopeDims{B, T, HS, W, NH + NKV, 0, 0}, +1, nullptr);
    };
    return Runner{run, [=] { return host(qkv); }};
  };
  return c;
}

std::vector<Case> llama_cases(bool quick) {
  // quick: ragged sizes (no multiple of a warp or a 16-byte pack but HS).
  const int64_t N = quick ? 37 : 4096, C = quick ? 83 : 2048, H = quick ? 45 : 8192;
  return {rmsnorm_fwd(N, C), rmsnorm_bwd(N, C), swiglu_case(N, H, false), swiglu_case(N, H, true),
          quick ? rope_case(2, 9, 4, 2, 16) : rope_case(4, 1024, 32, 8, 64)};
}

}  // namespace eng::bench
