// Precision levels, their policies, and the autocast casts (see precision.h).
#include "engine/precision.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/compute_copies.h"
#include "engine/ops.h"
#include "engine/ops/op_common.h"

#if defined(ENGINE_HAVE_CUDA)
#include "engine/gpu_context.h"
#endif

namespace eng {

Precision parse_precision(const std::string& s) {
  for (Precision p : {Precision::O0, Precision::O1, Precision::O2, Precision::O2_fp16, Precision::O3})
    if (s == precision_name(p)) return p;
  ENGINE_USER_FAIL("unknown precision '", s, "' (expected one of ", kPrecisionLevels, ")");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::O0:
      return "O0";
    case Precision::O1:
      return "O1";
    case Precision::O2:
      return "O2";
    case Precision::O2_fp16:
      return "O2-fp16";
    case Precision::O3:
      return "O3";
  }
  return "?";
}

PrecisionPolicy precision_policy(Precision p) {
  PrecisionPolicy pol;
  pol.level = p;
  pol.tf32_gemm = p == Precision::O1;
  pol.compute = p == Precision::O2 || p == Precision::O3 ? DType::bf16
                : p == Precision::O2_fp16                ? DType::f16
                                                         : DType::f32;
  // bf16 has fp32's exponent range, so its gradients do not underflow; fp16's
  // 5-bit exponent loses small gradients without a loss scale.
  pol.loss_scaling = p == Precision::O2_fp16 ? LossScaling::dynamic : LossScaling::off;
  pol.cuda_graph = p == Precision::O3;
  return pol;
}

std::string precision_summary(Precision p, Device dev) {
  const PrecisionPolicy pol = precision_policy(p);
  const bool cuda = dev.type == DeviceType::cuda, cpu = dev.type == DeviceType::cpu;
  std::string s = std::string("precision ") + precision_name(p) + ": ";
  switch (p) {
    case Precision::O0:
      return s + "fp32 weights, activations and GEMMs";
    case Precision::O1:
      return s + (cuda ? "fp32 storage, TF32 GEMMs"
                       : "TF32 GEMMs exist only on the cuda device; on " + dev.str() + " this is O0 (fp32)");
    default:
      break;
  }
  s += std::string(dtype_name(pol.compute)) + " GEMM inputs and activations, fp32 master weights, AdamW state and " +
       "layernorm/softmax/loss statistics";
  if (pol.loss_scaling == LossScaling::dynamic) s += ", dynamic loss scaling";
  if (cpu)
    s += std::string("; the cpu kernels are f32 only, so ") + dtype_name(pol.compute) +
         " storage is emulated by rounding to it and back (fp32 compute)";
  if (p == Precision::O3 && cpu) s += "; CUDA graphs need a GPU device: on cpu O3 runs as O2";
  if (p == Precision::O3 && !cpu)
    s += std::string("; the training step is captured as a CUDA graph after one eager step") +
         (cuda ? "" : " (emu: the emulator records and replays it)");
  return s;
}

void apply_precision(Precision p, Device dev) {
#if defined(ENGINE_HAVE_CUDA)
  if (dev.type == DeviceType::cuda)
    gpu_context(dev.index).f32_gemm_mode = precision_policy(p).tf32_gemm ? ComputeMode::tf32 : ComputeMode::fp32;
#else
  (void)p, (void)dev;
#endif
}

Autocast::Autocast(Precision p, ComputeCopies* copies) : policy_(precision_policy(p)), copies_(copies) {
  ENGINE_CHECK(!copies || policy_.compute == DType::bf16, "Autocast: kept weight copies are bf16, precision ",
               precision_name(p), " computes in ", dtype_name(policy_.compute));
}

namespace {
// The kept copy of a master as an autograd op: the forward reads the copy (no
// launch); the backward casts the gradient's first rows back to the master's
// fp32, as the cast it replaces, or passes an fp32 gradient (a GEMM's or
// kernel's that wrote it wide: autograd's takes_wide_grad) through as it is.
Tensor use_copy(const Tensor& master, const Tensor& copy) {
  Tensor out = copy.detach();
  const int64_t rows = master.size(0);
  record("cast", out, {master}, [rows](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{detail::leading_rows_in(g, rows, DType::f32)};
  });
  accept_wide_grad(out);
  return out;
}
}  // namespace

Tensor Autocast::cast(const Tensor& x) const {
  if (!x.defined() || !active() || x.dtype() != DType::f32) return x;
  if (x.device().type == DeviceType::cpu) return x.to(policy_.compute).to(DType::f32);
  if (copies_ && copies_->holds(x) && x.ndim() >= 1) return use_copy(x, copies_->get(x, x.size(0)));
  return x.to(policy_.compute);
}

Tensor Autocast::cast_rows(const Tensor& x, int64_t rows) const {
  ENGINE_CHECK(active() && x.device().type != DeviceType::cpu && x.dtype() == DType::f32 && x.ndim() >= 1,
               "Autocast::cast_rows: pads an fp32 table on emu/cuda under O2/O3, got ", x.desc());
  if (copies_ && copies_->holds(x)) return use_copy(x, copies_->get(x, rows));
  return rows == x.size(0) ? x.to(policy_.compute) : pad_rows(x, rows, policy_.compute);
}

Tensor Autocast::f32(const Tensor& x) const {
  if (!x.defined() || x.dtype() == DType::f32 || x.dtype() == DType::f64) return x;
  return x.to(DType::f32);
}

}  // namespace eng
