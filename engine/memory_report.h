// Memory report: bytes per parameter by component, measured from the tensors
// the engine holds (parameters, their .grad, the optimizer's state tensors)
// and the device allocator's counters, laid out so it can be checked against
// the usual accounting:
//   fp32 AdamW (O0/O1): 4 weights + 4 grads + 8 moments           = 16 B/param
//   mixed precision (O2, O2-fp16, O3):
//     2 low-precision weights + 4 fp32 master weights + 4 fp32 grads
//     + 8 fp32 moments                                            = 18 B/param
// The 18 is the "fp32 gradients" convention. The ZeRO paper's 2+2+12 = 16
// counts 16-bit gradients; here the backward's cast node converts each weight
// gradient to fp32 and it accumulates (over micro-batches too) into the fp32
// master's .grad, which the fused AdamW kernel reads, so fp32 grads are what
// the engine really holds. The 16-bit weight copies are made in each forward
// (Autocast::cast) and freed after the backward; they are counted at the
// compute dtype's size, what a GPU run holds at its peak. Activations,
// workspaces and allocator caching are not per parameter: the report prints
// the allocator's current and peak bytes beside the table instead.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/device.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "engine/precision.h"

namespace eng {

struct MemoryReport {
  Precision precision = Precision::O0;
  Device device;
  int64_t params = 0;    // parameter elements
  size_t weights = 0;    // the weights the forward reads: the fp32 parameters (O0/O1) or their 16-bit copies (O2+)
  size_t master = 0;     // fp32 master weights kept beside 16-bit copies (O2+); 0 when the weights are the masters
  size_t grads = 0;      // parameter .grad tensors now allocated
  size_t optimizer = 0;  // per-parameter optimizer state (AdamW exp_avg + exp_avg_sq, SGD momentum)
  std::string optimizer_note;  // the optimizer's name and what its state is
  size_t counters = 0;         // optimizer step counters (host bookkeeping, not per parameter)
  MemoryStats allocator;       // the device allocator's counters at report time

  size_t total() const { return weights + master + grads + optimizer; }
  double per_param(size_t bytes) const { return params ? double(bytes) / double(params) : 0.0; }
  std::string str() const;  // the table train prints
};

// The memory a run can still take on `dev`, and where that figure comes
// from: on cuda, cudaMemGetInfo's free bytes; on the host (cpu, emu), the
// least of /proc/meminfo's MemAvailable, the cgroup's limit less its usage
// without page cache (v2 memory.max, v1 memory.limit_in_bytes) and the address-space limit
// (ulimit -v) less this process's size. The train program checks its plan
// against it before the first step.
struct Headroom {
  size_t bytes = 0;
  std::string source;  // "MemAvailable", "cgroup memory.max", "ulimit -v", "cudaMemGetInfo"
};
Headroom memory_headroom(Device dev);
// Address space left under ulimit -v (RLIMIT_AS less this process's VmSize);
// none when there is no such limit.
std::optional<size_t> address_space_left();

// Measures the report; grads and optimizer state count only once they exist
// (after the first backward and optimizer step), so train reports after step 1.
MemoryReport memory_report(const Module& model, const Optimizer& opt, Precision p);

}  // namespace eng
