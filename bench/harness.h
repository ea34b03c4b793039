// The kernel workbench's harness (bench/kernels): a Case is one kernel at one
// shape with its bytes/FLOPs formula (copied from the kernel's comment block)
// and a bind() that creates its inputs on a device; the Workbench validates
// every implementation against the cpu reference, then times it (warm-up,
// repeats, median; on a GPU the L2 is flushed before each run and the time
// comes from CUDA events) and prints one line per (kernel, impl, shape).
// Conventions: inputs are f32 (the GEMMs also bf16/f16, with the cpu reference
// computed in f32 on the rounded values), drawn from seeded RNGs so every
// device sees the same values; a Runner's run() may overwrite its outputs (and, for in-place
// kernels such as AdamW, its state) on every call.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/peaks.h"
#include "engine/tensor.h"

namespace eng::bench {

// The rates the workbench's percentages divide by (engine/peaks.h).
struct Peaks {
  CpuPeaks cpu;
  std::string gpu_name;          // "" when no GPU answers
  const GpuPeak* gpu = nullptr;  // nullptr for an unknown GPU
};

// Implementations: the engine's cpu kernels (the reference), the hand-written
// CUDA kernels under the emulator, the same kernels on a real GPU, and the
// vendor libraries on a real GPU: NVIDIA's cuBLASLt (the yardstick for our
// tiled GEMM) and cuDNN (fused attention, softmax; kernels/cudnn/).
enum class Impl : uint8_t { cpu, emu, cuda, cublaslt, cudnn };
const char* impl_name(Impl impl);
Device impl_device(Impl impl);

// Which peak a case's "percent of peak" refers to: memory bandwidth, or a
// compute rate. On a GPU, `compute` is the CUDA-core FP32 rate (our kernels
// use no tensor cores, whatever their storage type); the tensor-core rates
// are for cuBLASLt's TF32 and BF16/FP16 modes. On the cpu every compute
// bound means the measured SGEMM rate.
enum class Bound : uint8_t { memory, compute, compute_tf32, compute_bf16_fp16 };

// One case bound to a device: run() launches the kernel(s) once; output()
// copies the results (several outputs concatenated) to the host as floats.
struct Runner {
  std::function<void()> run;
  std::function<std::vector<float>()> output;
};

// How one implementation of a case is run and judged. Ours (cpu, emu, cuda)
// take the Case's own fields; each vendor row (a cuBLASLt compute mode, a
// cuDNN call) has its own (inputs, tolerance, peak) and runs on a GPU only.
struct ImplRow {
  Impl impl = Impl::cublaslt;  // for a vendor row: whose
  std::string missing;         // non-empty: the vendor has no such kernel, and why (printed instead)
  std::string dtype;           // its compute mode, printed in the dtype column: "tf32"
  double bytes = 0;
  double flops = 0;  // 0: the case's
  Bound bound = Bound::compute;
  double atol = 0, rtol = 0;
  std::function<Runner(Device)> bind;  // empty in builds without CUDA
};

// A rung of a kernel ladder (kernels/cuda/ladder.h): an earlier, simpler
// version of the case's GPU kernel, run on emu and cuda before ours and
// printed as "emu/naive", with its own bytes (its traffic model, from its
// comment block) and flops, validated against the same cpu reference with
// the case's tolerance, or its own where it sums in another order. f32 cases
// only.
struct Rung {
  std::string name;  // "naive", "warp", "vec", "smem", "mma", "unfused"
  double bytes = 0, flops = 0;
  std::function<Runner(Device)> bind;
  double atol = 0, rtol = 0;                  // 0: the case's
  std::optional<Bound> bound = std::nullopt;  // unset: the case's
};
// A tensor-core rung (kernels/cuda/gemm_mma.h, attention_mma.h; bf16, f16):
// measured against the BF16/FP16 peak, not the CUDA cores' FP32.
inline Rung mma_rung(double bytes, double flops, std::function<Runner(Device)> bind) {
  Rung r{"mma", bytes, flops, std::move(bind)};
  r.bound = Bound::compute_bf16_fp16;
  return r;
}
// The names --impl takes besides the rungs': the cpu reference, our GPU
// kernels, the vendors.
inline constexpr const char* kImplNames[] = {"cpu", "ours", "cublaslt", "cudnn"};
inline constexpr const char* kRungNames[] = {"naive", "warp", "vec", "smem", "mma", "unfused"};

struct Case {
  std::string name;             // "layernorm_bwd"
  std::string shape;            // "N=4096 C=768"
  std::string dtype = "f32";    // storage of the inputs and outputs
  double bytes = 0, flops = 0;  // per run(), from the kernel's formula
  Bound bound = Bound::memory;
  double atol = 1e-5, rtol = 1e-5;  // validation: |x - ref| <= atol + rtol |ref|
  std::string gpu_missing;          // non-empty: no emu/cuda kernel yet, and why
  std::function<Runner(Device)> bind;
  std::vector<ImplRow> vendor;  // cuBLASLt / cuDNN rows, validated against the same cpu reference
  std::vector<Rung> ladder;     // the naive versions, in the order the docs/kernels page walks them
};

struct Result {
  std::string name, impl, shape, dtype;
  double median_ms = 0, gbps = 0, tflops = 0, pct_peak = 0;
  double bytes = 0, flops = 0;  // per run, the formulas the rates came from (the roofline's intensity)
  std::string peak;             // what pct_peak is a percent of, "" when none
  bool validated = false;       // compared against the reference (or is it)
  bool pass = true;
  double max_err = 0, max_rel = 0;
  std::string note;
};
inline Result make_result(const std::string& name, const std::string& impl, const std::string& shape,
                          const std::string& dtype) {
  Result r;
  r.name = name;
  r.impl = impl;
  r.shape = shape;
  r.dtype = dtype;
  return r;
}

struct Options {
  bool quick = false;
  bool emu = false;
  int warmup = 2, repeats = 10;
  std::string json;    // --json FILE
  std::string filter;  // run the cases whose name contains this
  // --impl: the rows to run, e.g. {"naive", "ours"}; empty: all. The cpu
  // reference row runs and prints whatever is chosen: it validates the others.
  std::vector<std::string> impls;
  bool wants(const std::string& impl) const;
  bool gemm_sweep = false;
  std::string m_range, n_range, k_range;  // a:b:step, empty: the sweep's defaults
};

// Times fn on dev: `warmup` untimed runs, then `repeats` timed ones; returns
// the median in milliseconds. On cuda each timed run is preceded by an L2
// flush and measured with CUDA events; elsewhere with steady_clock.
double median_ms(const std::function<void()>& fn, Device dev, int warmup, int repeats);

// The GEMM sweep's figures per implementation, and per cuBLASLt compute mode
// the ratio of its median TFLOP/s to our kernel's in the same storage type,
// measured in the same run (JSON "gemm_sweep").
struct SweepSummary {
  std::string impl, dtype, best_shape, worst_shape;
  double best = 0, median = 0, worst = 0;  // TFLOP/s
};
struct SweepRatio {
  std::string mode, storage;  // "tf32", "f32"
  double cublaslt_median = 0, ours_median = 0, ratio = 0;
};

// Max abs and rel error of x against ref, and whether every element passes.
struct Compare {
  double max_abs = 0, max_rel = 0;
  bool pass = true;
};
Compare compare(const std::vector<float>& x, const std::vector<float>& ref, double atol, double rtol);

class Workbench {
 public:
  Workbench(const Options& opt, const Peaks& peaks) : opt_(opt), peaks_(peaks) {}
  // Validates, times and prints every available implementation of c.
  void run_case(const Case& c);
  // Fills gbps, tflops and pct_peak of r from its median time, prints and records it.
  void report(Result r, double bytes, double flops, Bound bound, Impl impl);
  // Prints text once per run (the same text again is ignored) and keeps it for the JSON "notes".
  void note_once(const std::string& text);
  void add_sweep(const SweepSummary& s) { sweep_.push_back(s); }
  void add_ratio(const SweepRatio& r) { ratios_.push_back(r); }
  // Our cuda row's time over each vendor row's, per case, measured in the same run (JSON "vendor_ratios").
  struct VendorRatio {
    std::string name, shape, vendor, dtype;
    double ours_ms = 0, vendor_ms = 0, ratio = 0;
  };
  const std::vector<VendorRatio>& vendor_ratios() const { return vendor_ratios_; }
  const std::vector<Result>& results() const { return results_; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<SweepSummary>& sweep() const { return sweep_; }
  const std::vector<SweepRatio>& ratios() const { return ratios_; }
  bool all_pass() const;
  const Options& options() const { return opt_; }
  const Peaks& peaks() const { return peaks_; }

 private:
  void note_only(const Case& c, const char* impl, const std::string& note);
  // One row: bind on impl's device, run once, validate against ref (the cpu
  // row becomes ref), time, report; returns the row's result.
  // label: the printed impl column ("" = impl's name; a rung's "emu/naive").
  Result measure(const Case& c, Impl impl, const ImplRow& row, std::vector<float>& ref, const std::string& label = "");
  // Why a vendor row cannot run here ("" when it can).
  std::string vendor_unavailable(const ImplRow& row) const;
  const Options& opt_;
  const Peaks& peaks_;
  std::vector<Result> results_;
  std::vector<std::string> notes_;
  std::vector<SweepSummary> sweep_;
  std::vector<SweepRatio> ratios_;
  std::vector<VendorRatio> vendor_ratios_;
};

void write_json(const std::string& path, const Workbench& wb);

// The once-per-run line that says why the cuBLASLt rows are skipped.
std::string cublaslt_skip_note();
// The same for the cuDNN rows, with cuDNN's reason (kernels/cudnn/cudnn.h).
std::string cudnn_skip_note(const std::string& why);

// Host helpers for the cases.
std::vector<float> host(const Tensor& t);  // t's values as floats, any device
std::vector<float> concat(std::vector<std::vector<float>> parts);

}  // namespace eng::bench
