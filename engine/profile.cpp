// Named ranges and the profiler window (engine/profile.h).
#include "engine/profile.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "base/error.h"

#if defined(ENGINE_HAVE_CUDA)
#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace eng::profile {

namespace {

bool g_nvtx = false;
std::vector<RangeEvent>* g_log = nullptr;

// Now, as RangeEvent keeps it: the wall clock, not steady_clock, so that
// the logs of several ranks line up on one time axis.
int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ENGINE_RANGE_LOG=FILE: the whole process's ranges, one "push TIME NAME" or
// "pop TIME" per line (TIME first: names hold spaces), written at exit.
struct EnvLog {
  std::string path;
  std::vector<RangeEvent> events;
  EnvLog() {
    const char* p = std::getenv("ENGINE_RANGE_LOG");
    if (!p || !*p) return;
    path = p;
    // Under mpirun (Open MPI, MPICH/Slurm's PMI) each rank its own file.
    for (const char* rank_var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
      if (const char* r = std::getenv(rank_var); r && *r) {
        path += std::string(".rank") + r;
        break;
      }
    g_log = &events;
    std::atexit([] { env_log().write(); });
  }
  static EnvLog& env_log();
  void write() const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "ENGINE_RANGE_LOG: cannot write %s\n", path.c_str());
      return;
    }
    for (const RangeEvent& e : events) {
      if (e.push)
        std::fprintf(f, "push %lld %s\n", static_cast<long long>(e.time_us), e.name.c_str());
      else
        std::fprintf(f, "pop %lld\n", static_cast<long long>(e.time_us));
    }
    std::fclose(f);
  }
};
EnvLog& EnvLog::env_log() {
  static EnvLog& log = *new EnvLog;  // never destroyed: the atexit writer runs after static destructors
  return log;
}
// Reads the environment once, before main, so a log starts with the process.
[[maybe_unused]] const bool g_env_read = (EnvLog::env_log(), true);

// Layer names by id (id = index + 1), shared by all threads.
std::mutex g_layers_mu;
std::vector<std::string> g_layer_names;
std::unordered_map<std::string, int> g_layer_ids;
thread_local int t_layer = 0;

int layer_id(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_layers_mu);
  auto [it, fresh] = g_layer_ids.emplace(name, int(g_layer_names.size()) + 1);
  if (fresh) g_layer_names.push_back(name + " backward");
  return it->second;
}
std::string backward_name(int id) {
  std::lock_guard<std::mutex> lock(g_layers_mu);
  return g_layer_names[size_t(id - 1)];
}

// Pushes to whichever outputs are on and says which; pop takes the same.
void push(const char* name, bool& nvtx, bool& logged) {
  nvtx = g_nvtx;
  logged = g_log != nullptr;
#if defined(ENGINE_HAVE_CUDA)
  if (nvtx) nvtxRangePushA(name);
#endif
  if (logged) g_log->push_back({true, name, now_us()});
}
void pop(bool nvtx, bool logged) {
#if defined(ENGINE_HAVE_CUDA)
  if (nvtx) nvtxRangePop();
#else
  (void)nvtx;
#endif
  if (logged && g_log) g_log->push_back({false, "", now_us()});
}

}  // namespace

void enable_nvtx(bool on) { g_nvtx = on; }
bool nvtx_enabled() { return g_nvtx; }

// A range is popped from the outputs it was pushed to: switching NVTX or the
// log on or off while it is open never pops what was not pushed.
Range::Range(const char* name) : nvtx_(false), logged_(false) {
  if (g_nvtx || g_log) push(name, nvtx_, logged_);
}
Range::~Range() { pop(nvtx_, logged_); }

Layer::Layer(const std::string& name) : name_(name), id_(layer_id(name)) {}

LayerTag::LayerTag(const Layer& layer) : prev_(t_layer) { t_layer = layer.id(); }
LayerTag::~LayerTag() { t_layer = prev_; }

int current_layer() { return t_layer; }

void BackwardLayers::enter(int layer) {
  if (layer == layer_) return;
  pop(nvtx_, logged_);
  nvtx_ = logged_ = false;
  layer_ = layer;
  if (layer_ != 0 && (g_nvtx || g_log)) push(backward_name(layer_).c_str(), nvtx_, logged_);
}
BackwardLayers::~BackwardLayers() { pop(nvtx_, logged_); }

void set_range_log(std::vector<RangeEvent>* log) { g_log = log; }

std::string check_nesting(const std::vector<RangeEvent>& log) {
  std::vector<std::string> open;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].push) {
      open.push_back(log[i].name);
    } else {
      if (open.empty()) return cat("event ", i, ": a pop with no open range");
      open.pop_back();
    }
  }
  if (!open.empty()) return cat(open.size(), " range(s) left open, the innermost '", open.back(), "'");
  return "";
}

void profiler_start() {
#if defined(ENGINE_HAVE_CUDA)
  cudaProfilerStart();
#endif
}
void profiler_stop() {
#if defined(ENGINE_HAVE_CUDA)
  cudaProfilerStop();
#endif
}

StepWindow parse_step_window(const std::string& text, int64_t last_step, const std::string& what) {
  StepWindow w;
  if (text.empty()) return w;
  const size_t colon = text.find(':');
  auto number = [&](const std::string& s, int64_t& out) {
    if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    out = std::stoll(s);
    return true;
  };
  const bool ok = colon != std::string::npos && number(text.substr(0, colon), w.first) &&
                  number(text.substr(colon + 1), w.last) && w.first >= 1 && w.first <= w.last && w.last <= last_step;
  ENGINE_USER_CHECK(ok, what, " '", text,
                    "': expected A:B, steps A to B (1-based, inclusive) with 1 <= A <= B <= ", last_step);
  return w;
}

}  // namespace eng::profile
