// cross_entropy_sharded (engine/ops.h): softmax cross-entropy with the
// vocabulary split over ranks, as Megatron-LM's vocab-parallel
// cross-entropy. The engine knows nothing of ranks: the caller's `reduce`
// all-reduces (comm/vocab_parallel.h passes the tp group's). Forward:
//   my (max, sum of exp, target logit) per row  -> max over ranks
//   my sum rescaled to the global max           -> sum (and target) over ranks
//   lse = M + log S, loss = mean over valid rows of lse - target logit.
// Backward, local: softmax - onehot on my columns, scaled by g / valid.
// Kernels: kernels/cpu/cross_entropy_shard.cpp, kernels/cuda/cross_entropy_shard.cu.
#include <algorithm>

#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cross_entropy_shard.h"

namespace eng {
using namespace detail;

namespace {

struct ShardDims {
  int64_t N, V, Vv, start;
};

// emu/cuda: statistics in fp32 on the device; the mean and 1/valid stay there
// too, so a CUDA graph can capture the loss (as cross_entropy's).
Tensor sharded_gpu(const Tensor& logits, const Tensor& targets, ShardDims d, const ShardReduceFn& reduce,
                   int32_t ignore_index) {
  const Device dev = logits.device();
  const gpu::Storage st = storage_of(logits.dtype());
  Tensor stats = Tensor::empty({3 * d.N}, DType::f32, dev);  // m | s | t
  float* m = stats.data<float>();
  ENGINE_GPU_CALL(dev, ce_shard_stats, st, logits.data_ptr(), targets.data<int32_t>(), d.N, d.V, d.Vv, d.start, m,
                  m + d.N, m + 2 * d.N, nullptr);
  Tensor M = stats.slice(0, d.N).clone();
  reduce(M, ShardReduce::max);
  ENGINE_GPU_CALL(dev, ce_shard_rescale, m, M.data<float>(), m + d.N, d.N, nullptr);
  Tensor st_sum = stats.slice(d.N, 3 * d.N);
  reduce(st_sum, ShardReduce::sum);
  Tensor losses = Tensor::empty({d.N}, DType::f32, dev), lse = Tensor::empty({d.N}, DType::f32, dev);
  ENGINE_GPU_CALL(dev, ce_shard_finish, M.data<float>(), m + d.N, m + 2 * d.N, targets.data<int32_t>(), d.N,
                  ignore_index, losses.data<float>(), lse.data<float>(), nullptr);
  Tensor counts = Tensor::empty({2}, DType::f32, dev);
  ENGINE_GPU_CALL(dev, cross_entropy_count_valid, targets.data<int32_t>(), d.N, ignore_index, 1.f, counts.data<float>(),
                  nullptr);
  Tensor out = Tensor::empty({}, logits.dtype(), dev);
  ENGINE_GPU_CALL(dev, cross_entropy_mean, st, losses.data<float>(), d.N, counts.data<float>(), out.data_ptr(),
                  nullptr);
  const bool rec = needs_record({logits});
  Tensor sl = rec ? logits.detach() : Tensor(), stg = rec ? targets : Tensor();
  record("cross_entropy_sharded", out, {logits},
         [sl, stg, lse, counts, d, ignore_index](const Tensor& g, const std::vector<bool>&) {
           Tensor dl = empty_like(sl);
           ENGINE_GPU_CALL(g.device(), ce_shard_backward, storage_of(sl.dtype()), sl.data_ptr(), lse.data<float>(),
                           stg.data<int32_t>(), d.N, d.V, d.Vv, d.start, ignore_index, counts.data<float>(),
                           dl.data_ptr(), nullptr);
           // A seed the host knows (known_seed) says whether to rescale; otherwise g
           // == 1 eagerly costs nothing, and captured the rescale is always recorded.
           const std::optional<double> known = known_seed(g);
           if (known ? *known != 1.0 : capturing() || g.to_f64_vector()[0] != 1.0) {
             const Tensor gs = g.to(DType::f32);  // the scale in fp32 whatever the storage
             ENGINE_GPU_CALL(g.device(), cross_entropy_scale_grad, storage_of(dl.dtype()), dl.data_ptr(),
                             gs.data<float>(), dl.numel(), nullptr);
           }
           return std::vector<Tensor>{dl};
         });
  return out;
}

}  // namespace

Tensor cross_entropy_sharded(const Tensor& logits, const Tensor& targets, VocabShard shard, const ShardReduceFn& reduce,
                             int32_t ignore_index) {
  const DType t = check_float_inputs("cross_entropy_sharded", {logits}, GpuKernel::yes);
  ENGINE_CHECK(logits.ndim() == 2, "cross_entropy_sharded: logits must be (N, V), got ", logits.desc());
  check_ids("cross_entropy_sharded", targets, logits);
  const int64_t N = logits.size(0), V = logits.size(1);
  ENGINE_CHECK(targets.shape() == Shape{N}, "cross_entropy_sharded: targets ", targets.desc(), " do not match logits ",
               logits.desc());
  ENGINE_CHECK(shard.start >= 0 && shard.vocab > 0, "cross_entropy_sharded: shard start ", shard.start,
               " of a vocabulary of ", shard.vocab);
  ENGINE_CHECK(N < (int64_t(1) << 24), "cross_entropy_sharded: ", N,
               " rows; the device count of valid rows is exact below 2^24");
  const ShardDims d{N, V, std::clamp<int64_t>(shard.vocab - shard.start, 0, V), shard.start};
  // Targets checked on the host, as cross_entropy's (not inside a capture).
  if (!(on_gpu(logits) && capturing())) {
    const Tensor h = targets.device().type == DeviceType::cuda ? targets.to(kCPU) : targets;
    const int32_t* tg = h.data<int32_t>();
    for (int64_t r = 0; r < N; ++r)
      ENGINE_CHECK(tg[r] == ignore_index || (tg[r] >= 0 && tg[r] < shard.vocab), "cross_entropy_sharded: target ",
                   tg[r], " at row ", r, " outside the vocabulary [0, ", shard.vocab, ")");
  }
  if (on_gpu(logits)) return sharded_gpu(logits, targets, d, reduce, ignore_index);

  const int32_t* tg = targets.data<int32_t>();
  int64_t valid = 0;
  for (int64_t r = 0; r < N; ++r) valid += tg[r] != ignore_index;
  Tensor stats = Tensor::empty({3 * N}, t, logits.device());  // m | s | t
  Tensor M = Tensor::empty({N}, t, logits.device()), lse = Tensor::empty({N}, t, logits.device());
  double total = 0;
  dispatch_float(t, [&]<typename T>() {
    T* m = stats.data<T>();
    cpu::ce_shard_stats(logits.data<T>(), tg, N, V, d.Vv, d.start, m, m + N, m + 2 * N);
    M.copy_from(stats.slice(0, N));
  });
  reduce(M, ShardReduce::max);
  Tensor st_sum = stats.slice(N, 3 * N);
  dispatch_float(t, [&]<typename T>() { cpu::ce_shard_rescale(stats.data<T>(), M.data<T>(), st_sum.data<T>(), N); });
  reduce(st_sum, ShardReduce::sum);
  dispatch_float(t, [&]<typename T>() {
    std::vector<T> losses(static_cast<size_t>(N));
    const T* s = st_sum.data<T>();
    cpu::ce_shard_finish(M.data<T>(), s, s + N, tg, N, ignore_index, losses.data(), lse.data<T>());
    total = cpu::sum_all(losses.data(), N);
  });
  // As cross_entropy: 0 (and zero gradient) when every target is ignored.
  Tensor out = Tensor::full({}, valid ? total / double(valid) : 0.0, t, logits.device());
  const bool rec = needs_record({logits});
  Tensor sl = rec ? logits.detach() : Tensor(), stg = rec ? targets : Tensor();
  record("cross_entropy_sharded", out, {logits},
         [sl, stg, lse, d, valid, ignore_index](const Tensor& g, const std::vector<bool>&) {
           Tensor dl = empty_like(sl);
           dispatch_float(g.dtype(), [&]<typename T>() {
             const T scale = valid ? T(g.to_f64_vector()[0]) / T(valid) : T(0);
             cpu::ce_shard_backward(sl.data<T>(), lse.data<T>(), stg.data<int32_t>(), d.N, d.V, d.Vv, d.start,
                                    ignore_index, scale, dl.data<T>());
           });
           return std::vector<Tensor>{dl};
         });
  return out;
}

}  // namespace eng
