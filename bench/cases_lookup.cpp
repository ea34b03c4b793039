// The model's two ends: the fused softmax cross-entropy over the vocabulary
// (kernels/cuda/cross_entropy.cu) and the token embedding forward/backward
// (kernels/cuda/embedding.cu, its ids bucketed by kernels/cuda/bucket_by_id.cu),
// at GPT-2 124M's V = 50257, C = 768.
#include <string>

#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/bucket_by_id.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/embedding.h"

namespace eng::bench {

// n ids in [0, V), deterministic, with repeats and gaps (as real token streams have).
static std::vector<int32_t> make_ids(int64_t n, int64_t V) {
  std::vector<int32_t> ids(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7919 + (i * i) % 131) % V);
  return ids;
}

static std::string nv(const char* a, int64_t x, const char* b, int64_t y) {
  return std::string(a) + "=" + std::to_string(x) + " " + b + "=" + std::to_string(y);
}

// cross_entropy.cu (forward and dlogits in one kernel):
//   bytes = 2 N V sizeof(T) reads + N V sizeof(T) writes + 8 N
//   flops ~ 5 N V + 4 N V for dlogits.
// The cpu reference does the same work as cross_entropy_forward + _backward.
static Case cross_entropy(int64_t N, int64_t V) {
  Case c;
  c.name = "cross_entropy";
  c.shape = nv("N", N, "V", V);
  c.bytes = 12.0 * double(N * V) + 8.0 * double(N);
  c.flops = 9.0 * double(N * V);
  c.bind = [N, V](Device dev) {
    const Tensor logits = randn({N, V}, 13, dev, 3.f);
    const Tensor targets = Tensor::from_ints(make_ids(N, V), {N}, dev);
    const Tensor loss = Tensor::empty({N}, DType::f32, dev), lse = Tensor::empty({N}, DType::f32, dev);
    const Tensor dlogits = Tensor::empty({N, V}, DType::f32, dev);
    const float dloss = 1.f / float(N);
    const Tensor d_dloss = Tensor::full({1}, dloss, DType::f32, dev);  // the kernel reads its scale on the device
    auto run = [=] {
      if (dev.type == DeviceType::cpu) {
        cpu::cross_entropy_forward(logits.data<float>(), targets.data<int32_t>(), loss.data<float>(), lse.data<float>(),
                                   N, V, -100);
        cpu::cross_entropy_backward(logits.data<float>(), lse.data<float>(), targets.data<int32_t>(), dloss,
                                    dlogits.data<float>(), N, V, -100);
      } else {
        ENGINE_GPU_CALL(dev, cross_entropy_fused, gpu::Storage::f32, logits.data_ptr(), targets.data<int32_t>(),
                        loss.data<float>(), dlogits.data_ptr(), N, V, V, d_dloss.data<float>(), -100, nullptr);
      }
    };
    return Runner{run, [=] { return concat({host(loss), host(dlogits)}); }};
  };
  return c;
}

// embedding.cu forward: bytes = 2 n C sizeof(T) + 4 n; flops = 0 (a copy).
static Case embedding_fwd(int64_t n, int64_t V, int64_t C) {
  Case c;
  c.name = "embedding_fwd";
  c.shape = nv("n", n, "C", C) + " V=" + std::to_string(V);
  c.bytes = 8.0 * double(n * C) + 4.0 * double(n);
  c.flops = 0;
  c.atol = c.rtol = 0;  // a copy: exact
  c.bind = [n, V, C](Device dev) {
    const Tensor w = randn({V, C}, 14, dev), ids = Tensor::from_ints(make_ids(n, V), {n}, dev);
    const Tensor out = Tensor::empty({n, C}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::embedding_forward(w.data<float>(), ids.data<int32_t>(), out.data<float>(), n, C, 0, V);
      else
        ENGINE_GPU_CALL(dev, embedding_forward, gpu::Storage::f32, w.data_ptr(), ids.data<int32_t>(), out.data_ptr(), n,
                        C, 0, V, nullptr);
    };
    return Runner{run, [=] { return host(out); }};
  };
  return c;
}

// bucket_by_id.cu: the positions bucketed by id on the device, the backward's
// first half. bytes = P (20 n + 16 H) + 4 (V + 1) (bucket_by_id.h: P passes
// of 8 bits, H = 256 ceil(n / 256) digit counts); flops = 0. The cpu row is
// the reference's counting sort; the result must equal it exactly.
static Case embedding_bucket(int64_t n, int64_t V) {
  Case c;
  c.name = "embedding_bucket";
  c.shape = nv("n", n, "V", V);
  const kprof::Cost cost = kcost::bucket_by_id(nullptr, n, 0, V, nullptr, nullptr, nullptr, nullptr);
  c.bytes = cost.bytes;
  c.flops = 0;
  c.dtype = "i32";
  c.atol = c.rtol = 0;  // integers: exact
  c.bind = [n, V](Device dev) {
    const Tensor ids = Tensor::from_ints(make_ids(n, V), {n}, dev);
    const Tensor order = Tensor::empty({n}, DType::i32, dev), row_start = Tensor::empty({V + 1}, DType::i32, dev);
    const Tensor work = Tensor::empty({gpu::bucket_workspace(n)}, DType::i32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::bucket_by_id(ids.data<int32_t>(), n, 0, V, order.data<int32_t>(), row_start.data<int32_t>());
      else
        ENGINE_GPU_CALL(dev, bucket_by_id, ids.data<int32_t>(), n, 0, V, order.data<int32_t>(),
                        row_start.data<int32_t>(), work.data<int32_t>(), nullptr);
    };
    return Runner{run, [=] { return concat({host(order), host(row_start)}); }};
  };
  return c;
}

// embedding.cu backward: bytes = n C sizeof(T) (dout) + V C sizeof(T) (dw) +
// 4 (n + V + 1); flops = n C adds. The GPU kernel takes the positions bucketed
// by id (order, row_start: embedding_bucket above, which the engine op runs
// before it each step); here they are built once, outside the timing.
static Case embedding_bwd(int64_t n, int64_t V, int64_t C) {
  Case c;
  c.name = "embedding_bwd";
  c.shape = nv("n", n, "C", C) + " V=" + std::to_string(V);
  c.bytes = 4.0 * double(n * C) + 4.0 * double(V * C) + 4.0 * double(n + V + 1);
  c.flops = double(n * C);
  c.bind = [n, V, C](Device dev) {
    const std::vector<int32_t> idv = make_ids(n, V);
    const Tensor dout = randn({n, C}, 15, dev), ids = Tensor::from_ints(idv, {n}, dev);
    const Tensor dw = Tensor::empty({V, C}, DType::f32, dev);
    std::vector<int32_t> row_start(size_t(V + 1), 0), order(size_t(n), 0);
    cpu::bucket_by_id(idv.data(), n, 0, V, order.data(), row_start.data());
    const Tensor d_order = Tensor::from_ints(order, {n}, dev), d_row_start = Tensor::from_ints(row_start, {V + 1}, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu)
        cpu::embedding_backward(dout.data<float>(), ids.data<int32_t>(), dw.data<float>(), n, V, C, 0);
      else
        ENGINE_GPU_CALL(dev, embedding_backward, gpu::Storage::f32, gpu::Storage::f32, dout.data_ptr(),
                        d_order.data<int32_t>(), d_row_start.data<int32_t>(), dw.data_ptr(), false, n, V, C, nullptr);
    };
    return Runner{run, [=] { return host(dw); }};
  };
  return c;
}

std::vector<Case> cross_entropy_embedding_cases(bool quick) {
  if (quick)
    return {cross_entropy(19, 259), embedding_fwd(37, 53, 37), embedding_bucket(1100, 300), embedding_bwd(37, 53, 37)};
  // The bucketing at GPT-2 124M's step: B 8 and B 64 sequences of 1024.
  return {cross_entropy(1024, 50257), embedding_fwd(4096, 50257, 768), embedding_bucket(8192, 50257),
          embedding_bucket(65536, 50257), embedding_bwd(4096, 50257, 768)};
}

}  // namespace eng::bench
