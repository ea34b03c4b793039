// Memory report (see memory_report.h for the accounting convention).
#include "engine/memory_report.h"

#include <sys/resource.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "engine/cuda_runtime.h"

namespace eng {

namespace {

// The first number in `path` (bytes; "max" or a missing file: none).
std::optional<size_t> read_bytes(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) return std::nullopt;
  return size_t(std::stoull(word));
}

// A "Key:   123 kB" line of a /proc file, in bytes.
std::optional<size_t> proc_kb(const char* path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return size_t(std::stoull(line.substr(key.size() + 1))) * 1024;
  return std::nullopt;
}

// A "key value" line of a cgroup memory.stat file (bytes).
std::optional<size_t> stat_value(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  size_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace

Headroom memory_headroom(Device dev) {
  if (dev.type == DeviceType::cuda) return {cudart::free_device_memory(dev.index), "cudaMemGetInfo"};
  Headroom h{std::numeric_limits<size_t>::max(), "no limit found"};
  auto consider = [&](std::optional<size_t> bytes, const char* source) {
    if (bytes && *bytes < h.bytes) h = {*bytes, source};
  };
  consider(proc_kb("/proc/meminfo", "MemAvailable"), "MemAvailable");
  // cgroup v2, then v1 (whose "no limit" is a huge number, never the least).
  // Usage counts the page cache, which the kernel reclaims before it fails
  // an allocation: left out, or a container that has read much (a build, a
  // dataset) would look full.
  struct Cgroup {
    const char *limit, *usage, *stat, *cache_key, *name;
  };
  for (const Cgroup& c :
       {Cgroup{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "file",
               "cgroup memory.max"},
        Cgroup{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
               "/sys/fs/cgroup/memory/memory.stat", "total_cache", "cgroup memory.limit_in_bytes"}}) {
    const auto l = read_bytes(c.limit), u = read_bytes(c.usage);
    if (!l || !u) continue;
    const size_t cache = stat_value(c.stat, c.cache_key).value_or(0);
    const size_t used = *u > cache ? *u - cache : 0;
    consider(*l > used ? *l - used : 0, c.name);
  }
  consider(address_space_left(), "ulimit -v");
  return h;
}

std::optional<size_t> address_space_left() {
  struct rlimit rl {};
  const auto vm = proc_kb("/proc/self/status", "VmSize");
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || !vm) return std::nullopt;
  return size_t(rl.rlim_cur) > *vm ? size_t(rl.rlim_cur) - *vm : 0;
}

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
  r.optimizer_note = cat(opt.name(), ": ", opt.state_note());
  r.allocator = allocator_for(r.device).stats();
  return r;
}

std::string MemoryReport::str() const {
  const PrecisionPolicy pol = precision_policy(precision);
  const bool mixed = pol.compute != DType::f32;
  std::string s;
  char line[400];
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
  row("optimizer state", optimizer, optimizer ? optimizer_note : "not allocated yet (first step)");
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
