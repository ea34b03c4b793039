// bench/kernels: the kernel workbench. For every kernel family and every
// implementation (cpu, emu with --emu, cuda when a GPU answers, and the
// vendors' cuBLASLt and cuDNN on a GPU) it validates
// against the cpu reference, then times it and prints time, GB/s, TFLOP/s and
// percent of peak; --gemm-sweep times GEMMs over ranges of shapes; --json
// writes every result. Exit status: 0, or 1 if any validation failed (or an
// error occurred), 2 for a bad command line. See docs/bench.md.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "bench/cases.h"
#include "engine/cuda_runtime.h"
#include "kernels/gemm/gemm.h"

using namespace eng;
using namespace eng::bench;

namespace {

void usage() {
  std::printf(
      "usage: kernels [options]\n"
      "Validates each kernel's implementations against the cpu reference, then times them.\n"
      "  --quick          small sizes, one warm-up run, one repeat, quick peak measurement (CI)\n"
      "  --emu            also run the emulated CUDA kernels (tiny shapes only; the times are\n"
      "                   the emulator's, not a GPU's); larger shapes are skipped\n"
      "  --filter STR     only the kernels whose name contains STR (e.g. layernorm, matmul)\n"
      "  --impl LIST      only these rows, comma-separated (default: all): ours (our GPU kernels),\n"
      "                   the ladders' rungs naive, smem, unfused (kernels/cuda/ladder.h: the\n"
      "                   simpler kernels docs/kernels walks from, f32) and mma (tensor cores:\n"
      "                   kernels/cuda/gemm_mma.h, attention_mma.h; bf16, f16), cublaslt, cudnn; the cpu\n"
      "                   reference row always runs, as every row is checked against it\n"
      "  --warmup N       untimed runs before timing (default 2; --quick: 1)\n"
      "  --repeats N      timed runs; the median is reported (default 10; --quick: 1)\n"
      "  --json FILE      write every result (and the peaks used) to FILE as JSON\n"
      "  --gemm-sweep     time C = A @ B over the M x N x K ranges below instead of the kernels\n"
      "  --m-range R      sweep range a:b:step (b inclusive), a:b or a (default 512:2048:512;\n"
      "  --n-range R        --quick: 64:128:64)\n"
      "  --k-range R\n"
      "  --help           this text\n"
      "On a GPU the matmul cases and the sweep also run cuBLASLt (fp32, tf32, bf16, fp16), and\n"
      "the sweep prints each mode's median TFLOP/s over ours in the same storage type. The attention\n"
      "(bf16, f16), layernorm and softmax cases also run cuDNN (libcudnn.so.9, or ENGINE_CUDNN_LIBRARY).\n"
      "After every vendor row a 'ratio' line gives our cuda time over the vendor's for that case\n"
      "(when --impl runs ours too).\n"
      "Kernels: matmul (fwd, weight grad; f32, bf16, f16), layernorm, softmax, gelu (fwd, bwd), cross_entropy,\n"
      "embedding (fwd, bwd), adamw_step, adamw8bit_step, adafactor_step, attention (fwd, bwd; f32, bf16, f16). Percent "
      "of peak: on the cpu, of\n"
      "this machine's measured copy bandwidth or SGEMM rate; on A100/H100/H200, of the datasheet.\n");
}

// --impl's comma-separated names into out; "" or the error (naming the
// known rows) for an empty or unknown name.
std::string impl_list(const std::string& list, std::vector<std::string>& out) {
  std::string known;
  for (const char* n : kImplNames) known += std::string(known.empty() ? "" : ", ") + n;
  for (const char* n : kRungNames) known += std::string(", ") + n;
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, end - start);
    if (name.empty() || (", " + known + ",").find(", " + name + ",") == std::string::npos)
      return "--impl: unknown row '" + name + "' in '" + list + "'; the rows are: " + known;
    out.push_back(name);
    start = end + 1;
  }
  return "";
}

// Parses argv into o; returns false (after a message) on a bad command line.
bool parse(int argc, char** argv, Options& o, bool& help) {
  bool warmup_set = false, repeats_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    auto count = [&](int& out) {
      std::string s;
      if (!value(s)) return false;
      char* end = nullptr;
      const long n = std::strtol(s.c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > 100000) return false;
      out = int(n);
      return true;
    };
    bool ok = true;
    if (a == "--help" || a == "-h")
      help = true;
    else if (a == "--quick")
      o.quick = true;
    else if (a == "--emu")
      o.emu = true;
    else if (a == "--gemm-sweep")
      o.gemm_sweep = true;
    else if (a == "--filter")
      ok = value(o.filter);
    else if (a == "--json")
      ok = value(o.json);
    else if (a == "--impl") {
      std::string list;
      ok = value(list);
      const std::string err = ok ? impl_list(list, o.impls) : "";
      if (!err.empty()) {
        std::fprintf(stderr, "kernels: %s\n", err.c_str());
        return false;
      }
    } else if (a == "--m-range")
      ok = value(o.m_range);
    else if (a == "--n-range")
      ok = value(o.n_range);
    else if (a == "--k-range")
      ok = value(o.k_range);
    else if (a == "--warmup")
      ok = warmup_set = count(o.warmup);
    else if (a == "--repeats")
      ok = repeats_set = count(o.repeats) && o.repeats >= 1;
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "kernels: bad option or value: %s (see --help)\n", a.c_str());
      return false;
    }
  }
  if (o.gemm_sweep && !o.impls.empty()) {
    std::fprintf(stderr,
                 "kernels: --impl chooses the kernels' rows; the GEMM sweep runs every GEMM (drop one of them)\n");
    return false;
  }
  if (o.quick && !warmup_set) o.warmup = 1;
  if (o.quick && !repeats_set) o.repeats = 1;
  return true;
}

void print_peaks(const Peaks& p) {
  std::printf("cpu: %d threads, %s\n", p.cpu.threads, cpu::blas_info().c_str());
  std::printf("cpu peaks (measured): copy %.1f GB/s (%zu MiB, read+write), SGEMM %.3f TFLOP/s (%lld^3)\n",
              p.cpu.copy_gbps, p.cpu.copy_bytes >> 20, p.cpu.sgemm_tflops, (long long)p.cpu.sgemm_n);
  if (p.gpu_name.empty())
    std::printf("cuda: no GPU answers%s\n", cuda_built() ? "" : " (this build has no CUDA)");
  else if (p.gpu)
    std::printf("cuda: %s; peaks from the %s datasheet: %.0f GB/s, FP32 %.1f, TF32 %.0f, BF16/FP16 %.0f TFLOP/s\n",
                p.gpu_name.c_str(), p.gpu->label, p.gpu->hbm_gbps, p.gpu->fp32_tflops, p.gpu->tf32_tflops,
                p.gpu->bf16_tflops);
  else
    std::printf("cuda: %s (not in the peak table: no percent of peak)\n", p.gpu_name.c_str());
  std::printf("%-22s %-12s %-28s %-4s %10s %14s %16s\n", "kernel", "impl", "shape", "type", "median", "bandwidth",
              "compute");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool help = false;
  if (!parse(argc, argv, o, help)) return 2;
  if (help) {
    usage();
    return 0;
  }
  try {
    Peaks peaks;
    peaks.cpu = measure_cpu_peaks(o.quick);
    if (cuda_available()) {
      peaks.gpu_name = cudart::device_name(0);
      peaks.gpu = gpu_peak_for(peaks.gpu_name, cudart::sm_count(0));
    }
    print_peaks(peaks);
    Workbench wb(o, peaks);
    if (o.gemm_sweep) {
      gemm_sweep(wb);
    } else {
      for (auto family : {matmul_cases, layernorm_softmax_cases, gelu_adamw_cases, optimizer_cases,
                          cross_entropy_embedding_cases, attention_cases, reduce_cases, llama_cases})
        for (const Case& c : family(o.quick))
          if (c.name.find(o.filter) != std::string::npos) wb.run_case(c);
    }
    if (!o.json.empty()) {
      write_json(o.json, wb);
      std::printf("wrote %s\n", o.json.c_str());
    }
    if (!wb.all_pass()) {
      std::fprintf(stderr, "kernels: VALIDATION FAILED (see the FAIL lines above)\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
