// The planned peak and its check against free memory (see memory_plan.h).
#include "models/train/memory_plan.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "comm/world.h"
#include "engine/memory_report.h"
#include "kernels/gemm/gemm.h"
#include "models/train/train_dist.h"

namespace eng::models {

namespace {

// Decimal units, as --memory_limit_gb.
std::string gb(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

// The measured peak of a step is within 5.3% above its plan
// (tests/models/test_memory_plan.cpp: plan >= 0.95 x measured); the check
// and the batch it suggests keep that much, and the allocator's rounding,
// to spare.
constexpr double kMargin = 1.06;

// On the host: the address space the compute threads take at their first
// GEMM and malloc, taken now so the headroom below counts it. OpenBLAS would
// loop forever on a buffer it cannot get, so under ulimit -v the room for
// them is checked first. "" or the error.
std::string warm_host_threads() {
  const size_t need = size_t(omp_get_max_threads()) * cpu::kThreadReserveBytes;
  if (const auto left = address_space_left(); left && *left < need)
    return cat("memory: ulimit -v leaves ", gb(double(*left)), " of address space; the ", omp_get_max_threads(),
               " compute thread(s) take up to ", gb(double(need)),
               " (OpenBLAS's buffer and a malloc arena each) before any batch: raise ulimit -v, or fewer threads "
               "(OMP_NUM_THREADS)");
  cpu::warm_threads();
  return "";
}

}  // namespace

double activation_bytes_per_sample(const BlockStack& s, Device dev, Precision p, double head_bytes_per_token) {
  const bool half = precision_policy(p).compute != DType::f32;
  const bool cpu = dev.type == DeviceType::cpu;
  const double A = half ? (cpu ? 72.0 : 32.0) : 64.0;  // bytes per unit of width, per token and block
  const double tp = double(s.tp), rest = s.sequence_parallel ? tp : 1.0;
  const double C = double(s.width);
  const double attention = 4.0 * double(s.heads) * (cpu ? double(s.tokens) : 1.0) / tp;
  const double element = half && !cpu ? 2.0 : 4.0;  // the residual stream's element size
  const double cp = double(std::max<int64_t>(s.cp, 1));
  const double gathered = cp > 1 ? 2.0 * cp * C / tp * element : 0.0;  // K and V of every slice, per token of mine
  const double block = A * C * (12.0 / 16.0 / tp + 4.0 / 16.0 / rest) + attention + gathered;
  const double blocks = s.recompute ? double(s.layers) * C * element / rest + block : double(s.layers) * block;
  return double(s.tokens) / cp * (blocks + 8.0 * C + head_bytes_per_token);
}

size_t state_bytes(int64_t params, Precision p, int64_t optimizer_shards, double optimizer_bytes) {
  const bool half = precision_policy(p).compute != DType::f32;
  const double per_param =
      4.0 + (half ? 2.0 : 0.0) + 4.0 + optimizer_bytes / double(std::max<int64_t>(optimizer_shards, 1));
  return size_t(per_param * double(params));
}

std::string check_memory_plan(const MemoryPlan& plan, Device dev, double limit_gb) {
  const comm::World& w = comm::world();
  const double planned = double(plan.planned());
  const std::string what =
      cat(w.size > 1 ? cat("rank ", w.rank, ": ") : "", "batch_size ", plan.micro, " plans ", gb(planned), " on ",
          dev.str(), " (weights, gradients and AdamW state ", gb(double(plan.state_bytes)), " + activations ",
          plan.micro, " x ", plan.in_flight > 1 ? cat(plan.in_flight, " micro-batches in flight x ") : "",
          gb(plan.activations_per_sample), ")");
  if (dev.type != DeviceType::cuda) {
    const std::string error = warm_host_threads();
    for (const std::string& e : comm::all_gather_strings(error, "the threads' address space"))
      if (!e.empty()) throw WorldError(e);
  }
  if (limit_gb < 0) return cat("memory plan: ", what, "; not checked (--memory_limit_gb ", limit_gb, ")");
  // Free now, plus what this process already holds (the parameters): the
  // plan counts those too. Host memory is shared by the node's ranks. An
  // explicit limit caps the plan itself.
  Headroom room = memory_headroom(dev);
  std::string source = room.source;
  if (dev.type != DeviceType::cuda && w.local_size > 1) {
    room.bytes /= size_t(w.local_size);
    source += cat(", shared by ", w.local_size, " ranks on ", w.host);
  }
  const MemoryStats held = allocator_for(dev).stats();  // live tensors and cached blocks: this process's to reuse
  double available = double(room.bytes) + double(held.current_bytes) + double(held.cached_bytes);
  if (limit_gb > 0 && limit_gb * 1e9 < available) available = limit_gb * 1e9, source = "--memory_limit_gb";
  std::string error;
  if (planned * kMargin > available) {
    const double fit = std::floor((available / kMargin - double(plan.state_bytes)) /
                                  (plan.activations_per_sample * double(plan.in_flight)));
    error =
        cat("memory: ", what, ", more than the ", gb(available), " it can have (", source,
            ") less 6% for the step's temporaries and the allocator's rounding; ",
            fit >= 1 ? cat("batch_size ", int64_t(fit), " fits (raise grad_accum to keep the global batch)")
                     : std::string("not even batch_size 1 fits (a smaller model, --recompute, --tp, --pp or --zero 1)"),
            "; --memory_limit_gb -1 skips this check");
  }
  for (const std::string& e : comm::all_gather_strings(error, "the memory check"))
    if (!e.empty()) throw WorldError(e);
  return cat("memory plan: ", what, " of ", gb(available), " (", source, ")");
}

}  // namespace eng::models
