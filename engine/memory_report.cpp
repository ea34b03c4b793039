// Memory report (see memory_report.h for the accounting convention).
#include "engine/memory_report.h"

#include <cstdio>

namespace eng {

MemoryReport memory_report(const Module& model, const Optimizer& opt, Precision p) {
  MemoryReport r;
  r.precision = p;
  const PrecisionPolicy pol = precision_policy(p);
  size_t param_bytes = 0;
  for (const Tensor& t : model.parameters()) {
    r.params += t.numel();
    r.device = t.device();
    param_bytes += t.nbytes();
    const Tensor g = t.grad();
    if (g.defined()) r.grads += g.nbytes();
  }
  if (pol.compute == DType::f32) {
    r.weights = param_bytes;
  } else {
    r.weights = size_t(r.params) * dtype_size(pol.compute);
    r.master = param_bytes;
  }
  // State entries named "<kind>.<index>" belong to one parameter each;
  // the others ("step", "optimizer_steps", ...) are counters.
  for (const auto& [name, t] : opt.state())
    (name.find('.') != std::string::npos ? r.optimizer : r.counters) += t.nbytes();
  r.allocator = allocator_for(r.device).stats();
  return r;
}

std::string MemoryReport::str() const {
  const PrecisionPolicy pol = precision_policy(precision);
  const bool mixed = pol.compute != DType::f32;
  std::string s;
  char line[200];
  auto row = [&](const char* what, size_t bytes, const std::string& note) {
    std::snprintf(line, sizeof line, "  %-16s %12zu B  %6.2f B/param  %s\n", what, bytes, per_param(bytes),
                  note.c_str());
    s += line;
  };
  std::snprintf(line, sizeof line, "memory (%s, %s, %lld parameters):\n", precision_name(precision),
                device.str().c_str(), (long long)params);
  s += line;
  const std::string cd = dtype_name(pol.compute);
  row("weights", weights,
      mixed ? cd + " copies made in each forward, freed after backward" : "fp32, also the master weights");
  row("master weights", master, mixed ? "fp32, updated by the optimizer" : "none beyond the weights");
  row("gradients", grads, grads ? "fp32, accumulated into the masters' .grad" : "not allocated yet (first backward)");
  row("optimizer state", optimizer,
      optimizer ? "fp32 (AdamW: exp_avg + exp_avg_sq)" : "not allocated yet (first step)");
  row("total", total(),
      mixed ? "usual mixed-precision AdamW accounting: 2+4+4+8 = 18" : "usual fp32 AdamW: 4+4+8 = 16");
  std::snprintf(line, sizeof line,
                "  allocator on %s: %.2f MB held by live tensors, peak %.2f MB (activations and workspaces included); "
                "optimizer counters %zu B\n",
                device.str().c_str(), double(allocator.current_bytes) / 1e6, double(allocator.peak_bytes) / 1e6,
                counters);
  s += line;
  return s;
}

}  // namespace eng
