// The workbench harness: validation, timing (steady_clock on the host, CUDA
// events with an L2 flush on a GPU), the printed lines and the JSON file.
#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/cuda_runtime.h"
#include "kernels/cudnn/cudnn.h"

namespace eng::bench {

const char* impl_name(Impl impl) {
  switch (impl) {
    case Impl::cpu:
      return "cpu";
    case Impl::emu:
      return "emu";
    case Impl::cuda:
      return "cuda";
    case Impl::cublaslt:
      return "cublaslt";
    case Impl::cudnn:
      return "cudnn";
  }
  return "?";
}

Device impl_device(Impl impl) {
  return impl == Impl::cpu ? kCPU : impl == Impl::emu ? Device{DeviceType::emu, 0} : Device{DeviceType::cuda, 0};
}

std::vector<float> host(const Tensor& t) { return t.to_vector(); }

std::vector<float> concat(std::vector<std::vector<float>> parts) {
  std::vector<float> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// A buffer larger than any current GPU's L2 (40 MiB on A100, 50-60 MiB on
// H100/H200): writing it before each timed run evicts the kernel's inputs,
// so a run reads them from HBM, as it would inside a training step.
static constexpr size_t kFlushBytes = size_t(256) << 20;

// CUDA events and the flush buffer, made on first use and kept for the run.
struct GpuTimer {
  Tensor flush;
  void* start = nullptr;
  void* stop = nullptr;
  GpuTimer() {
    flush = Tensor::empty({int64_t(kFlushBytes / 4)}, DType::f32, Device{DeviceType::cuda, 0});
    start = cudart::event_create();
    stop = cudart::event_create();
  }
  ~GpuTimer() {
    cudart::event_destroy(start);
    cudart::event_destroy(stop);
  }
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  double time_ms(const std::function<void()>& fn) {
    cudart::memset_device(flush.data_ptr(), 0, kFlushBytes);
    cudart::event_record(start);
    fn();
    cudart::event_record(stop);
    return double(cudart::event_elapsed_ms(start, stop));
  }
};

double median_ms(const std::function<void()>& fn, Device dev, int warmup, int repeats) {
  static std::unique_ptr<GpuTimer> gpu;
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    if (dev.type == DeviceType::cuda) {
      if (!gpu) gpu = std::make_unique<GpuTimer>();
      ms.push_back(gpu->time_ms(fn));
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

Compare compare(const std::vector<float>& x, const std::vector<float>& ref, double atol, double rtol) {
  Compare c;
  if (x.size() != ref.size()) {
    c.pass = false;
    c.max_abs = c.max_rel = INFINITY;
    return c;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = ref[i], d = std::fabs(double(x[i]) - r);
    if (!(d <= atol + rtol * std::fabs(r))) c.pass = false;  // NaN fails too
    if (std::isnan(d)) {
      c.max_abs = c.max_rel = NAN;
      continue;
    }
    c.max_abs = std::max(c.max_abs, d);
    if (std::fabs(r) > atol) c.max_rel = std::max(c.max_rel, d / std::fabs(r));
  }
  return c;
}

static void print(const Result& r) {
  std::string figures;
  char buf[160];
  if (r.median_ms > 0) {
    std::snprintf(buf, sizeof buf, "%10.4f ms %9.2f GB/s %8.4f TFLOP/s", r.median_ms, r.gbps, r.tflops);
    figures = buf;
    if (!r.peak.empty()) {
      std::snprintf(buf, sizeof buf, " %6.1f%% of %s", r.pct_peak, r.peak.c_str());
      figures += buf;
    }
  }
  std::string check;
  if (r.validated) {
    std::snprintf(buf, sizeof buf, " | %s max_abs %.2e max_rel %.2e", r.pass ? "PASS" : "FAIL", r.max_err, r.max_rel);
    check = buf;
  }
  std::printf("%-22s %-12s %-28s %-4s %s%s%s%s\n", r.name.c_str(), r.impl.c_str(), r.shape.c_str(), r.dtype.c_str(),
              figures.c_str(), check.c_str(), r.note.empty() ? "" : " | ", r.note.c_str());
  std::fflush(stdout);
}

void Workbench::report(Result r, double bytes, double flops, Bound bound, Impl impl) {
  const double s = r.median_ms / 1e3;
  r.bytes = bytes;
  r.flops = flops;
  if (s > 0) {
    r.gbps = bytes / s / 1e9;
    r.tflops = flops / s / 1e12;
  }
  const bool mem = bound == Bound::memory;
  if (impl == Impl::cpu) {
    const double peak = mem ? peaks_.cpu.copy_gbps : peaks_.cpu.sgemm_tflops;
    r.peak = mem ? "copy BW" : "SGEMM";
    r.pct_peak = peak > 0 ? 100.0 * (mem ? r.gbps : r.tflops) / peak : 0;
  } else if (impl != Impl::emu && peaks_.gpu) {
    // Our kernels: memory against HBM, compute against CUDA-core FP32 (they
    // use no tensor cores, even on bf16/f16 storage); cuBLASLt's TF32 and
    // BF16/FP16 modes against their tensor-core columns.
    const GpuPeak& g = *peaks_.gpu;
    const double peak = mem                                 ? g.hbm_gbps
                        : bound == Bound::compute_tf32      ? g.tf32_tflops
                        : bound == Bound::compute_bf16_fp16 ? g.bf16_tflops
                                                            : g.fp32_tflops;
    const char* col = mem                                 ? "HBM BW "
                      : bound == Bound::compute_tf32      ? "TF32 "
                      : bound == Bound::compute_bf16_fp16 ? "BF16/FP16 "
                                                          : "FP32 ";
    r.peak = std::string(col) + g.label;
    r.pct_peak = 100.0 * (mem ? r.gbps : r.tflops) / peak;
  } else if (impl != Impl::emu) {
    if (!r.note.empty()) r.note += "; ";
    r.note += "no peak table entry for " + peaks_.gpu_name;
  }
  print(r);
  results_.push_back(r);
}

void Workbench::note_only(const Case& c, const char* impl, const std::string& note) {
  Result r = make_result(c.name, impl, c.shape, c.dtype);
  r.note = note;
  print(r);
  results_.push_back(r);
}

std::string cublaslt_skip_note() {
  return std::string("cublaslt: the cuBLASLt rows (fp32, tf32, bf16, fp16) need a GPU; skipped (") +
         (cuda_built() ? "no GPU answers" : "this build has no CUDA") + ")";
}

std::string cudnn_skip_note(const std::string& why) {
  return "cudnn: the cuDNN rows (attention bf16/fp16, layernorm, softmax) need a GPU with cuDNN 9; skipped (" + why +
         ")";
}

std::string Workbench::vendor_unavailable(const ImplRow& row) const {
  if (row.impl == Impl::cudnn) {
    const std::string why = cudnn_unavailable_reason();
    return why.empty() ? "" : cudnn_skip_note(why);
  }
  return row.bind && cuda_available() ? "" : cublaslt_skip_note();
}

void Workbench::note_once(const std::string& text) {
  if (std::find(notes_.begin(), notes_.end(), text) != notes_.end()) return;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  notes_.push_back(text);
}

bool Options::wants(const std::string& impl) const {
  return impls.empty() || std::find(impls.begin(), impls.end(), impl) != impls.end();
}

Result Workbench::measure(const Case& c, Impl impl, const ImplRow& row, std::vector<float>& ref,
                          const std::string& label) {
  Runner runner = row.bind(impl_device(impl));
  runner.run();
  const std::vector<float> out = runner.output();
  Result r = make_result(c.name, label.empty() ? impl_name(impl) : label, c.shape, row.dtype);
  r.validated = true;
  if (impl == Impl::cpu) {
    ref = out;
    r.pass = std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); });
    r.note = !r.pass                                ? "reference has non-finite values"
             : c.dtype == "f32" || c.dtype == "i32" ? "reference"
                                                    : "reference (f32 math on " + c.dtype + "-rounded inputs)";
  } else {
    const Compare cmp = compare(out, ref, row.atol, row.rtol);
    r.pass = cmp.pass;
    r.max_err = cmp.max_abs;
    r.max_rel = cmp.max_rel;
    char tol[64];
    std::snprintf(tol, sizeof tol, "atol %.0e rtol %.0e", row.atol, row.rtol);
    r.note = tol;
  }
  if (impl == Impl::emu) {
    // The validation run stands in for warm-up; one timed run is plenty for a meaningless figure.
    r.median_ms = median_ms(runner.run, impl_device(impl), 0, 1);
    r.note += "; emulated: the time is not a GPU time";
  } else {
    r.median_ms = median_ms(runner.run, impl_device(impl), opt_.warmup, opt_.repeats);
  }
  report(r, row.bytes, row.flops > 0 ? row.flops : c.flops, row.bound, impl);
  return results_.back();
}

void Workbench::run_case(const Case& c) {
  std::vector<float> ref;
  std::vector<Impl> impls{Impl::cpu};
  if (opt_.emu) impls.push_back(Impl::emu);
  impls.push_back(Impl::cuda);
  ImplRow ours;
  ours.dtype = c.dtype, ours.bytes = c.bytes, ours.bound = c.bound, ours.atol = c.atol, ours.rtol = c.rtol;
  ours.bind = c.bind;
  Result ours_cuda;  // our cuda row, for the vendor ratios
  for (Impl impl : impls) {
    const char* name = impl_name(impl);
    if (impl != Impl::cpu && !c.gpu_missing.empty()) {
      note_only(c, name, c.gpu_missing);
      continue;
    }
    if (impl == Impl::cuda && !cuda_available()) {
      note_only(c, name, "no GPU answers");
      continue;
    }
    // The emulator runs every GPU thread on the host: only tiny shapes are affordable.
    if (impl == Impl::emu && (c.bytes > 16e6 || c.flops > 2e8)) {
      note_only(c, name, "skipped: too large for the emulator (run --quick --emu)");
      continue;
    }
    if (impl == Impl::cpu) {  // the reference: always, whatever --impl chose
      measure(c, impl, ours, ref);
      continue;
    }
    // The ladder's rungs first, in the page's order, then ours.
    for (const Rung& rung : c.ladder) {
      if (!opt_.wants(rung.name)) continue;
      ImplRow row = ours;
      row.bytes = rung.bytes, row.flops = rung.flops, row.bind = rung.bind;
      if (rung.atol > 0) row.atol = rung.atol, row.rtol = rung.rtol;
      if (rung.bound) row.bound = *rung.bound;
      measure(c, impl, row, ref, std::string(name) + "/" + rung.name);
    }
    if (!opt_.wants("ours")) continue;
    const Result r = measure(c, impl, ours, ref);
    if (impl == Impl::cuda) ours_cuda = r;
  }
  // The vendors have no emulated twin: without a GPU (or without the
  // library) their rows are skipped, said once per run; a kernel the vendor
  // does not have is said on its row.
  for (const ImplRow& row : c.vendor) {
    if (!opt_.wants(impl_name(row.impl))) continue;
    if (!row.missing.empty()) {
      note_only(c, impl_name(row.impl), row.missing);
      continue;
    }
    const std::string why = vendor_unavailable(row);
    if (!why.empty()) {
      note_once(why);
      continue;
    }
    // A vendor that refuses a case (cuDNN: no engine for a shape) says so on
    // its row and the run goes on; a wrong result is a FAIL like ours.
    Result v_row;
    try {
      v_row = measure(c, row.impl, row, ref);
    } catch (const std::exception& e) {
      note_only(c, impl_name(row.impl), std::string("not run: ") + e.what());
      continue;
    }
    // Ratios of validated rows only: a time of a wrong result compares nothing.
    if (ours_cuda.pass && ours_cuda.median_ms > 0 && v_row.pass && v_row.median_ms > 0) {
      const double ms = v_row.median_ms, ours_cuda_ms = ours_cuda.median_ms;
      VendorRatio v{c.name, c.shape, impl_name(row.impl), row.dtype, ours_cuda_ms, ms, ours_cuda_ms / ms};
      std::printf("%-22s %-12s %-28s %-4s ours/%s time ratio %.2f (ours %.4f ms, %s %.4f ms)\n", c.name.c_str(),
                  "ratio", c.shape.c_str(), row.dtype.c_str(), v.vendor.c_str(), v.ratio, v.ours_ms, v.vendor.c_str(),
                  v.vendor_ms);
      std::fflush(stdout);
      vendor_ratios_.push_back(v);
    }
  }
}

bool Workbench::all_pass() const {
  return std::all_of(results_.begin(), results_.end(), [](const Result& r) { return r.pass; });
}

void write_json(const std::string& path, const Workbench& wb) {
  nlohmann::json results = nlohmann::json::array();
  for (const Result& r : wb.results()) {
    nlohmann::json j{{"name", r.name},           {"impl", r.impl},   {"shape", r.shape},   {"dtype", r.dtype},
                     {"median_ms", r.median_ms}, {"gbps", r.gbps},   {"tflops", r.tflops}, {"pct_peak", r.pct_peak},
                     {"peak", r.peak},           {"bytes", r.bytes}, {"flops", r.flops},   {"validated", r.validated},
                     {"pass", r.pass},           {"note", r.note}};
    j["max_err"] = r.validated ? nlohmann::json(r.max_err) : nlohmann::json(nullptr);
    j["max_rel"] = r.validated ? nlohmann::json(r.max_rel) : nlohmann::json(nullptr);
    results.push_back(j);
  }
  const Peaks& p = wb.peaks();
  nlohmann::json machine{{"cpu_copy_gbps", p.cpu.copy_gbps},
                         {"cpu_sgemm_tflops", p.cpu.sgemm_tflops},
                         {"cpu_sgemm_n", p.cpu.sgemm_n},
                         {"cpu_threads", p.cpu.threads},
                         {"gpu", p.gpu_name},
                         {"gpu_peak", p.gpu ? p.gpu->label : ""}};
  // The datasheet rates the percentages divide by, for the roofline (scripts/plot.py).
  if (p.gpu)
    machine["gpu_peaks"] = {{"hbm_gbps", p.gpu->hbm_gbps},
                            {"fp32_tflops", p.gpu->fp32_tflops},
                            {"tf32_tflops", p.gpu->tf32_tflops},
                            {"bf16_tflops", p.gpu->bf16_tflops}};
  const Options& o = wb.options();
  nlohmann::json doc{{"machine", machine},
                     {"options",
                      {{"quick", o.quick},
                       {"warmup", o.warmup},
                       {"repeats", o.repeats},
                       {"emu", o.emu},
                       {"filter", o.filter},
                       {"impls", o.impls}}},
                     {"results", results},
                     {"notes", wb.notes()}};
  nlohmann::json vr = nlohmann::json::array();
  for (const Workbench::VendorRatio& v : wb.vendor_ratios())
    vr.push_back({{"name", v.name},
                  {"shape", v.shape},
                  {"vendor", v.vendor},
                  {"dtype", v.dtype},
                  {"ours_ms", v.ours_ms},
                  {"vendor_ms", v.vendor_ms},
                  {"ratio", v.ratio}});
  doc["vendor_ratios"] = vr;
  doc["gemm_sweep"] = nullptr;
  if (o.gemm_sweep) {
    nlohmann::json impls = nlohmann::json::array(), ratios = nlohmann::json::array();
    for (const SweepSummary& s : wb.sweep())
      impls.push_back({{"impl", s.impl},
                       {"dtype", s.dtype},
                       {"best_tflops", s.best},
                       {"best_shape", s.best_shape},
                       {"median_tflops", s.median},
                       {"worst_tflops", s.worst},
                       {"worst_shape", s.worst_shape}});
    for (const SweepRatio& r : wb.ratios())
      ratios.push_back({{"mode", r.mode},
                        {"storage", r.storage},
                        {"cublaslt_median_tflops", r.cublaslt_median},
                        {"ours_median_tflops", r.ours_median},
                        {"ratio", r.ratio}});
    doc["gemm_sweep"] = {{"impls", impls}, {"ratios", ratios}};
  }
  std::ofstream f(path);
  ENGINE_CHECK(f, path, ": cannot open for writing");
  f << doc.dump(2) << "\n";
  ENGINE_CHECK(f, path, ": write failed");
}

}  // namespace eng::bench
