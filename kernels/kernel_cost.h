// What one GPU launcher call costs (bytes moved, FLOPs) and the hook a step
// profile records it through (engine/kernel_profile.h; `train
// --kernel_profile`, docs/profiling.md).
//
// Every launcher of kernels/cuda/<op>.h has a twin in namespace eng::kcost
// with the same parameters that returns its Cost: the bytes/FLOPs formula of
// its .cu file, as code. ENGINE_GPU_CALL (gpu_ops.h) evaluates it only while
// a profile listens, so a launcher without a cost does not compile where it
// is called, and a run that does not profile pays one thread-local read per
// call. Bytes count what a kernel must read and write in device memory
// (each input read once, each output written once; what caches may save is
// the kernel's efficiency, not its bytes); FLOPs count the math as the
// workbench does (a multiply-add is 2, exp/tanh about 10).
//
// The hook: a thread-local Sink (none by default). A Scope around a launcher
// call tells it begin(name, cost) and end(); every raw kernel launch inside
// (LAUNCH_KERNEL, a memcpy node, a host node) is count_launch(). Scopes nest
// (matmul's "gemm" scope holds the tiled_gemm call): the sink keeps the
// outermost and counts the inner launches to it.
#pragma once
#include <cstdint>

namespace eng::kprof {

// How a GPU model times a cost (engine/gpu_model.h): a GEMM by its shape
// class's tensor-core rate, attention by its kernels' measured rates, a
// copy or pointwise kernel by its bytes over the memory bandwidth.
enum class Kind : uint8_t { memory, gemm, attention_forward, attention_backward, host };

struct Cost {
  double bytes = 0;
  double flops = 0;
  Kind kind = Kind::memory;
  // GEMMs only: the product's shape, the element size of its storage and
  // whether every row stride is a multiple of 16 bytes (cuBLASLt's fast
  // kernels need it: GPT-2's lm_head at V = 50257 in bf16 is not).
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int elem_bytes = 4;
  bool aligned = true;
};

// A memory-bound kernel: `bytes` moved, `flops` of math.
inline Cost memory(double bytes, double flops = 0) { return Cost{bytes, flops}; }

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void begin(const char* name, const Cost& cost) = 0;
  virtual void end() = 0;
  virtual void launch() = 0;  // one raw launch (kernel, memcpy or host node)
};

// The listening sink of this host thread (nullptr: none). An inline
// variable: one instance shared by the g++- and nvcc-compiled objects.
inline thread_local Sink* t_sink = nullptr;
inline bool listening() { return t_sink != nullptr; }
inline void count_launch() {
  if (t_sink) t_sink->launch();
}

// begin() tells the sink, and the destructor ends what was begun (on the
// sink that was told, even if another listens by then).
class Scope {
 public:
  Scope() = default;
  Scope(const char* name, const Cost& cost) { begin(name, cost); }
  ~Scope() {
    if (sink_) sink_->end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  void begin(const char* name, const Cost& cost) {
    if (!t_sink || sink_) return;
    sink_ = t_sink;
    sink_->begin(name, cost);
  }

 private:
  Sink* sink_ = nullptr;
};

}  // namespace eng::kprof
