// Named ranges for profilers: NVTX ranges (Nsight Systems and Nsight Compute
// show them on the timeline) for a training step, its phases (data wait,
// forward, backward, communication, optimizer) and each layer, forward and
// backward; and the CUDA profiler's start/stop, so a profiler records only
// the steps asked for (--profile_steps, docs/profiling.md).
//
// Cost: NVTX is compiled in only in CUDA builds (the toolkit's header-only
// nvtx3), and is switched on only by runs on the cuda device
// (enable_nvtx); on cpu and emu a range is a function call that checks two
// flags. With no profiler attached NVTX itself does nothing.
//
// Layers: a LayerRange also marks the autograd nodes recorded inside it
// (engine/autograd.cpp asks current_layer()), and backward opens a range
// "<layer> backward" while it runs that layer's nodes, so the backward pass
// shows per layer too, in the order it runs them.
//
// The range log (set_range_log, or ENGINE_RANGE_LOG=FILE for a whole
// process, written at exit; under mpirun each rank writes FILE.rankN)
// records every push and pop on the host whatever the device, with its time:
// it is how the tests check that ranges nest and close, and what
// `scripts/plot.py timeline` draws, one row per rank.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eng::profile {

// NVTX on (runs on the cuda device) or off (the default).
void enable_nvtx(bool on);
bool nvtx_enabled();

// Opens a range; its destruction closes it. Ranges nest (a stack per thread).
class Range {
 public:
  explicit Range(const char* name);
  explicit Range(const std::string& name) : Range(name.c_str()) {}
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  // Where it was pushed, so it is popped there: NVTX or the log may be
  // switched on while it is open.
  bool nvtx_, logged_;
};

// A layer's name, registered once (a model keeps one per block) so that
// opening its range costs no lookup.
class Layer {
 public:
  explicit Layer(const std::string& name);
  const std::string& name() const { return name_; }
  int id() const { return id_; }

 private:
  std::string name_;
  int id_;
};

// Makes `layer` the one the autograd nodes recorded in its scope belong to,
// without a range (activation checkpointing tags its node so; the block's
// own LayerRange is inside).
class LayerTag {
 public:
  explicit LayerTag(const Layer& layer);
  ~LayerTag();
  LayerTag(const LayerTag&) = delete;
  LayerTag& operator=(const LayerTag&) = delete;

 private:
  int prev_;
};

// A Range that is also the layer the autograd nodes recorded inside it belong to.
class LayerRange {
 public:
  explicit LayerRange(const Layer& layer) : range_(layer.name()), tag_(layer) {}
  LayerRange(const LayerRange&) = delete;
  LayerRange& operator=(const LayerRange&) = delete;

 private:
  Range range_;
  LayerTag tag_;
};

// The innermost open layer's id (0: none), for autograd nodes to keep.
int current_layer();

// Backward's side: opens "<layer> backward" for the node being run when its
// layer differs from the previous node's, closes it when leaving; the
// destructor closes the last one.
class BackwardLayers {
 public:
  BackwardLayers() = default;
  ~BackwardLayers();
  BackwardLayers(const BackwardLayers&) = delete;
  BackwardLayers& operator=(const BackwardLayers&) = delete;
  void enter(int layer);

 private:
  int layer_ = 0;
  bool nvtx_ = false, logged_ = false;  // where the open "... backward" range was pushed
};

// Every push (with its name) and pop while a log is set, in order, with the
// time it happened: microseconds since the Unix epoch by the system clock
// (std::chrono::system_clock), so the ranks of one machine share a clock;
// across machines it is only as good as their clock sync.
struct RangeEvent {
  bool push = true;
  std::string name;
  int64_t time_us = 0;
};
// Records into *log (nullptr: stop). Single-threaded use (the training thread).
void set_range_log(std::vector<RangeEvent>* log);
// "" if the events nest and close (every pop closes the innermost open range
// and nothing is left open), else what is wrong.
std::string check_nesting(const std::vector<RangeEvent>& log);

// cudaProfilerStart / cudaProfilerStop: what `nsys profile
// --capture-range=cudaProfilerApi` and `ncu --profile-from-start off` wait
// for. No-ops in builds without CUDA.
void profiler_start();
void profiler_stop();

// A step window A:B (1-based, inclusive) parsed from "A:B" ("" is none);
// throws a one-line error starting with `what` and naming the text when it is
// not two integers with 1 <= A <= B <= last_step.
struct StepWindow {
  int64_t first = 0, last = 0;  // 0, 0: none
  bool empty() const { return first == 0; }
};
StepWindow parse_step_window(const std::string& text, int64_t last_step, const std::string& what);

}  // namespace eng::profile
