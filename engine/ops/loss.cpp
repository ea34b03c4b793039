// Losses: fused softmax cross-entropy (mean over non-ignored rows) and MSE,
// on cpu, emu and cuda.
#include <cstring>

#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/reduce.h"

namespace eng {
using namespace detail;

// On emu/cuda the loss is the graph's last op, so (as llm.c does) the forward
// runs the fused kernel that writes the per-row losses AND dlogits for the
// gradient the loss will receive: ExpectedSeed::current() (engine/autograd.h;
// 1/grad_accum in a training step), scaled by 1/valid. The backward hands
// that tensor back as it is when its seed is the one expected (known_seed:
// no pass over it, no host read, so a CUDA graph can capture it), and
// rescales it in place otherwise. No logits or logsumexp are saved, and
// probabilities never reach memory. 16-bit logits are read as they are
// (fp32 math inside) and dlogits written in their storage; the loss is fp32.
// V: the classes, the first V of each row of ld = logits.size(1).
static Tensor cross_entropy_gpu(const Tensor& logits, const Tensor& targets, int32_t ignore_index, int64_t V) {
  const int64_t N = logits.size(0), ld = logits.size(1);
  const Device dev = logits.device();
  const gpu::Storage st = storage_of(logits.dtype());
  const bool rec = needs_record({logits});
  ENGINE_CHECK(N < (int64_t(1) << 24), "cross_entropy: ", N,
               " rows; the device count of valid rows is exact below 2^24");
  const double seed = ExpectedSeed::current();
  Tensor losses = Tensor::empty({N}, DType::f32, dev), counts = Tensor::empty({2}, DType::f32, dev);
  Tensor dlogits = rec ? empty_like(logits) : Tensor();
  ENGINE_GPU_CALL(dev, cross_entropy_count_valid, targets.data<int32_t>(), N, ignore_index, float(seed),
                  counts.data<float>(), nullptr);
  ENGINE_GPU_CALL(dev, cross_entropy_fused, st, logits.data_ptr(), targets.data<int32_t>(), losses.data<float>(),
                  rec ? dlogits.data_ptr() : nullptr, N, V, ld, counts.data<float>(), ignore_index, nullptr);
  Tensor out = Tensor::empty({}, DType::f32, dev);
  ENGINE_GPU_CALL(dev, cross_entropy_mean, gpu::Storage::f32, losses.data<float>(), N, counts.data<float>(),
                  out.data_ptr(), nullptr);
  record("cross_entropy", out, {logits}, [dlogits, seed](const Tensor& g, const std::vector<bool>&) {
    // The closure runs once (autograd frees it after), so rescaling the saved
    // tensor in place is safe; by g / seed, on the device.
    if (known_seed(g) != seed) {
      const Tensor gs = scale(g.to(DType::f32), 1.0 / seed);
      ENGINE_GPU_CALL(g.device(), cross_entropy_scale_grad, storage_of(dlogits.dtype()), dlogits.data_ptr(),
                      gs.data<float>(), dlogits.numel(), nullptr);
    }
    return std::vector<Tensor>{dlogits};
  });
  return out;
}

// The classes are the first V columns of logits (N, W): all of them, or a
// vocabulary padded to W (cross_entropy_padded).
static Tensor cross_entropy_classes(const Tensor& logits, const Tensor& targets, int32_t ignore_index, int64_t V) {
  const DType t = check_float_inputs("cross_entropy", {logits}, GpuKernel::yes);
  ENGINE_CHECK(logits.ndim() == 2, "cross_entropy: logits must be (N, V), got ", logits.desc());
  check_ids("cross_entropy", targets, logits);
  const int64_t N = logits.size(0);
  ENGINE_CHECK(V > 0 && V <= logits.size(1), "cross_entropy: ", V, " classes in logits ", logits.desc());
  ENGINE_CHECK(targets.shape() == Shape{N}, "cross_entropy: targets ", targets.desc(), " do not match logits ",
               logits.desc());
  // The cpu kernels take whole rows: the padding is narrowed off (a copy;
  // its gradient lands in a zero tensor of the padded width).
  if (!on_gpu(logits) && V < logits.size(1)) return cross_entropy(narrow(logits, 1, 0, V), targets, ignore_index);
  // Targets are validated on the host before any kernel reads them: emu
  // memory is host memory; cuda targets are copied back (N int32s). Not
  // inside a graph capture (no batch there yet): a captured step checks its
  // batches on the host before uploading them.
  if (on_gpu(logits) && capturing()) return cross_entropy_gpu(logits, targets, ignore_index, V);
  const Tensor h_targets = targets.device().type == DeviceType::cuda ? targets.to(kCPU) : targets;
  const int32_t* tg = h_targets.data<int32_t>();
  int64_t valid = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (tg[r] == ignore_index) continue;
    ENGINE_CHECK(tg[r] >= 0 && tg[r] < V, "cross_entropy: target ", tg[r], " at row ", r,
                 " outside the vocabulary [0, ", V, ")");
    ++valid;
  }
  if (on_gpu(logits)) return cross_entropy_gpu(logits, targets, ignore_index, V);
  Tensor losses = Tensor::empty({N}, t, logits.device()), lse = Tensor::empty({N}, t, logits.device());
  double total = 0;
  dispatch_float(t, [&]<typename T>() {
    cpu::cross_entropy_forward(logits.data<T>(), tg, losses.data<T>(), lse.data<T>(), N, V, ignore_index);
    total = cpu::sum_all(losses.data<T>(), N);
  });
  // PyTorch returns NaN when every target is ignored; we return 0 with zero
  // gradient instead, so a fully padded micro-batch cannot poison a step.
  const double mean_loss = valid ? total / double(valid) : 0.0;
  Tensor out = Tensor::full({}, mean_loss, t, logits.device());
  const bool rec = needs_record({logits});
  Tensor sl = rec ? logits.detach() : Tensor(), st = rec ? targets : Tensor();
  record("cross_entropy", out, {logits},
         [sl, st, lse, N, V, valid, ignore_index](const Tensor& g, const std::vector<bool>&) {
           Tensor dl = empty_like(sl);
           dispatch_float(g.dtype(), [&]<typename T>() {
             // g read as double, not item() (float), so f64 gradients keep full precision.
             const T scale = valid ? T(g.to_f64_vector()[0]) / T(valid) : T(0);
             cpu::cross_entropy_backward(sl.data<T>(), lse.data<T>(), st.data<int32_t>(), scale, dl.data<T>(), N, V,
                                         ignore_index);
           });
           return std::vector<Tensor>{dl};
         });
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index) {
  ENGINE_CHECK(logits.ndim() == 2, "cross_entropy: logits must be (N, V), got ", logits.desc());
  return cross_entropy_classes(logits, targets, ignore_index, logits.size(1));
}

Tensor cross_entropy_padded(const Tensor& logits, const Tensor& targets, int64_t classes, int32_t ignore_index) {
  return cross_entropy_classes(logits, targets, ignore_index, classes);
}

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  const DType t = check_float_inputs("mse_loss", {pred, target}, GpuKernel::yes);
  check_same_shape("mse_loss", pred, target);
  if (on_gpu(pred)) {  // the loss and its gradient stay on the device (capturable)
    Tensor out = Tensor::empty({}, t, pred.device());
    const Tensor scratch = Tensor::empty({2 * gpu::kMseScratch}, DType::i32, pred.device());  // doubles
    ENGINE_GPU_CALL(pred.device(), mse_forward, storage_of(t), pred.data_ptr(), target.data_ptr(), pred.numel(),
                    static_cast<double*>(scratch.data_ptr()), out.data_ptr(), nullptr);
    if (!needs_record({pred, target})) return out;
    Tensor sp = pred.detach(), st = target.detach();
    record("mse_loss", out, {pred, target}, [sp, st](const Tensor& g, const std::vector<bool>& needs) {
      Tensor dp = empty_like(sp);
      ENGINE_GPU_CALL(sp.device(), mse_backward, storage_of(sp.dtype()), sp.data_ptr(), st.data_ptr(), g.data_ptr(),
                      dp.data_ptr(), sp.numel(), nullptr);
      return std::vector<Tensor>{dp, needs[1] ? scale(dp, -1.0) : Tensor()};
    });
    return out;
  }
  double m = 0;
  dispatch_float(t, [&]<typename T>() { m = cpu::mse_forward(pred.data<T>(), target.data<T>(), pred.numel()); });
  Tensor out = Tensor::full({}, m, t, pred.device());
  const bool rec = needs_record({pred, target});
  Tensor sp = rec ? pred.detach() : Tensor(), st = rec ? target.detach() : Tensor();
  record("mse_loss", out, {pred, target}, [sp, st](const Tensor& g, const std::vector<bool>& needs) {
    Tensor dp = empty_like(sp);
    dispatch_float(g.dtype(), [&]<typename T>() {
      cpu::mse_backward(sp.data<T>(), st.data<T>(), T(g.to_f64_vector()[0]), dp.data<T>(), sp.numel());
    });
    return std::vector<Tensor>{dp, needs[1] ? scale(dp, -1.0) : Tensor()};
  });
  return out;
}

}  // namespace eng
