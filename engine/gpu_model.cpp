// The step model's figures and the profile table (engine/gpu_model.h).
#include "engine/gpu_model.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "base/error.h"
#include "engine/graph.h"

namespace eng {

namespace {

// Shares of the HBM bandwidth our kernels reached: in the workbench on the
// H100 SXM (docs/gpu.md, the first run, 2026-11-26, medians of 10), and, for
// the kernels GPT-2's step runs, in that step as --kernel_profile measured it
// on the H200 (the second run, 2026-11-28, and the third, 2026-11-29; B 8 x
// 1024, O3): the step's shapes, not the workbench's, and the figure the
// model's checks are made on. A kernel not measured gets
// kDefaultMemoryShare. A kernel rewritten since gets a launcher of a new
// name (the recorded steps of the model's checks keep their measured ones):
// layernorm_backward is the block-per-row kernel of the H100 run,
// fused_residual_layernorm_backward the warp-per-row one.
const std::map<std::string, double>& measured_memory_share() {
  static const std::map<std::string, double> m{
      // the H100's workbench
      {"layernorm_backward", 0.179},
      {"softmax_forward", 0.309},
      {"softmax_backward", 0.457},
      {"gelu_forward", 0.758},
      {"gelu_backward", 0.782},
      {"embedding_forward", 0.513},
      {"mse_forward", 0.693},
      // the H200's GPT-2 step (B 8), the second run
      {"layernorm_forward", 0.495},
      // ... and the third: the kernels as they run now. The cross-entropy
      // loads four packs before folding (measured after that change);
      // layernorm's backward takes its pack-at-a-time kernel at B 8 (the
      // launcher stages a row's packs in registers only from 16 rows a
      // warp: 51% at B 64); wte's gradient keeps 8 rows in flight a group
      {"cross_entropy_fused", 0.671},
      {"fused_residual_layernorm_backward", 0.281},
      {"embedding_backward", 0.164},
      {"adamw_multi_tensor", 0.764},
      {"sum_squares_multi_tensor", 0.600},
      // the third run's workbench (4096 x 4096; 16.8M parameters)
      {"adamw8bit_multi_tensor", 0.229},
      {"adafactor_multi_tensor", 0.253},
      // the third run's Llama 3.2 1B step (B 4 x 2048, O3, recompute,
      // cuDNN's attention): RMSNorm runs layernorm's kernels with kRms
      {"rmsnorm_forward", 0.186},
      {"fused_residual_rmsnorm_backward", 0.274},
      {"swiglu_forward", 0.761},
      {"swiglu_backward", 0.652},
      {"rope_apply", 0.464},
      // kernels rewritten since the second run, under the names the recorded
      // steps of the model's checks give them (tests/fixtures/kernel_profile_*)
      {"cross_entropy_fused (two reads)", 0.398},
      {"fused_residual_layernorm_backward (serial reduce)", 0.228},
      // the row's packs staged in registers, one block an SM: at B 8 two
      // waves of 4 rows a warp (the third run's step)
      {"fused_residual_layernorm_backward (staged at B 8)", 0.216},
      // a block a row summing its positions in series: the byte tokens' few
      // ids make a long tail (76% on the workbench's spread ids)
      {"embedding_backward (one group)", 0.102},
      // a float at a time a thread (16-byte packs since)
      {"adamw_multi_tensor (a float a thread)", 0.651},
      {"sum_squares_multi_tensor (a float a thread)", 0.422},
  };
  return m;
}
constexpr double kDefaultMemoryShare = 0.80;  // assumed: a streaming kernel written for bandwidth
// Assumed until a GPU measures them.
const std::map<std::string, double>& assumed_memory_share() {
  static const std::map<std::string, double> m{
      // RMSNorm's fused residual forward runs layernorm's kernel with kRms:
      // layernorm's forward share
      {"fused_residual_rmsnorm_forward", 0.495},
  };
  return m;
}

// cuBLASLt on the H100 (docs/gpu.md): bf16 57.4% (fc 4096x3072x768) and 64.0%
// (its dW) of the dense peak, tf32 68.9%, fp32 56.6% and 73.4%: the means.
// The H200's GPT-2 step confirmed bf16: its 169 GEMMs at 59% (65% at B 64).
constexpr double kGemmShareBf16 = 0.60, kGemmShareTf32 = 0.69, kGemmShareFp32 = 0.65;
// Assumed, not measured: a GEMM whose row strides are not 16-byte aligned
// (lm_head at V = 50257 in bf16) cannot use cuBLASLt's vectorised/TMA
// kernels; the fallback is taken to run at 40% of the aligned rate. No step
// runs one since the vocabulary is padded, so it stays unmeasured.
constexpr double kUnalignedGemmFactor = 0.40;
// Attention, TFLOP/s (B 8 x 1024, 12 heads of 64, causal, bf16) as the H200's
// GPT-2 step measured it: cuDNN's SDPA (the second run) and our tensor-core
// kernels' second version (attention_*_mma, the third: 53% and 45% of
// cuDNN's; the first version's 84.2 and 70 are in the second run's recorded
// step, which the model now times at these). Our CUDA-core kernels as the
// H100's workbench measured them (B 2; the H200's: 8.2/8.7).
constexpr double kOursAttnFwd = 7.9, kOursAttnBwd = 6.2, kCudnnAttnFwd = 239, kCudnnAttnBwd = 206;
constexpr double kMmaAttnFwd = 125.7, kMmaAttnBwd = 91.9;
// Our tensor-core GEMM (a "gemm ... mma" row, train --gemm mma) as the H200's
// step measured it: 69 TFLOP/s over the step's GEMMs against cuBLASLt's 583,
// 12% (the weight gradients' K = 8192 run on few blocks: 17-50 TFLOP/s).
constexpr double kMmaGemmShare = 0.12;
// Assumed: what one launch costs inside a CUDA graph (the gap between
// kernel nodes and a small kernel's ramp on Hopper), and a host node (the
// graph waits for the host function, then resumes).
constexpr double kLaunchUs = 2.0, kHostNodeUs = 20.0;

const GpuPeak& h100() { return *gpu_peak_for("NVIDIA H100 80GB HBM3", 132); }

std::string pct(double share) { return cat(int(share * 100 + 0.5), "%"); }

// An eager upload's host task: a captured step (O3) has no such node, its
// replay fills the staging before it starts (engine/graph.h).
bool gone_when_captured(const KernelCall& call, Precision level) {
  return precision_policy(level).cuda_graph && call.name == kUploadHostNode;
}

}  // namespace

GpuModel gpu_model(const std::string& key) {
  std::string k = key;
  for (char& c : k) c = char(std::tolower(static_cast<unsigned char>(c)));
  const char* name = k == "h100"   ? "NVIDIA H100 80GB HBM3"
                     : k == "h200" ? "NVIDIA H200"
                     : k == "a100" ? "NVIDIA A100-SXM4-80GB"
                                   : nullptr;
  ENGINE_USER_CHECK(name, "model_gpu '", key, "': expected h100, h200 or a100 (the SXM parts of engine/peaks.cpp)");
  return GpuModel{k, gpu_peak_for(name)};
}

ModelledCall model_call(const GpuModel& gpu, const KernelCall& call, Precision level, ModelAttention attention) {
  const GpuPeak& p = *gpu.peak;
  const kprof::Cost& c = call.cost;
  ModelledCall m;
  const double launch_s = double(call.launches) * kLaunchUs * 1e-6;
  auto memory_s = [&](double share) { return c.bytes / (share * p.hbm_gbps * 1e9); };
  switch (c.kind) {
    case kprof::Kind::gemm: {
      // f32 storage runs the precision's mode (O0 fp32, O1 tf32); 16-bit storage bf16/fp16.
      const bool f32 = c.elem_bytes == 4;
      const double peak = f32 ? (level == Precision::O0 ? p.fp32_tflops : p.tf32_tflops) : p.bf16_tflops;
      const bool mma = call.name.ends_with(" mma");
      const double share = (f32 ? (level == Precision::O0 ? kGemmShareFp32 : kGemmShareTf32) : kGemmShareBf16) *
                           (c.aligned ? 1.0 : kUnalignedGemmFactor) * (mma ? kMmaGemmShare : 1.0);
      const double s = std::max(c.flops / (share * peak * 1e12), memory_s(kDefaultMemoryShare));
      m.ms = (s + launch_s) * 1e3;
      m.basis = cat("GEMM at ", pct(share), " of ",
                    f32 && level == Precision::O0 ? "FP32"
                    : f32                         ? "TF32"
                                                  : "BF16",
                    mma         ? " (ours on tensor cores, measured: 12% of cuBLASLt's)"
                    : c.aligned ? " (measured)"
                                : " (unaligned: assumed)");
      return m;
    }
    case kprof::Kind::attention_forward:
    case kprof::Kind::attention_backward: {
      const bool fwd = c.kind == kprof::Kind::attention_forward;
      const bool cudnn = attention == ModelAttention::cudnn || call.name.rfind("cudnn", 0) == 0;
      const bool mma = !cudnn && call.name.ends_with("_mma");
      const double cudnn_rate = fwd ? kCudnnAttnFwd : kCudnnAttnBwd;
      const double h100_rate = cudnn ? cudnn_rate
                               : mma ? (fwd ? kMmaAttnFwd : kMmaAttnBwd)
                               : fwd ? kOursAttnFwd
                                     : kOursAttnBwd;
      // Another GPU: tensor-core kernels scale with the tensor-core peak, ours on CUDA cores with theirs.
      const double rate =
          h100_rate * (cudnn || mma ? p.bf16_tflops / h100().bf16_tflops : p.fp32_tflops / h100().fp32_tflops);
      m.ms = (std::max(c.flops / (rate * 1e12), memory_s(kDefaultMemoryShare)) + launch_s) * 1e3;
      m.basis = cudnn ? cat("cuDNN SDPA at ", rate, " TFLOP/s (measured)")
                : mma ? cat("ours on tensor cores at ", rate, " TFLOP/s (measured)")
                      : cat("ours at ", rate, " TFLOP/s (measured)");
      return m;
    }
    case kprof::Kind::host:
      if (gone_when_captured(call, level)) {
        m.basis = "none in the captured step (its replay fills the staging)";
        return m;
      }
      m.ms = double(call.launches) * kHostNodeUs * 1e-3;
      m.basis = cat("host node, ", kHostNodeUs, " us (assumed)");
      return m;
    case kprof::Kind::memory:
      break;
  }
  const auto it = measured_memory_share().find(call.name);
  const auto assumed = assumed_memory_share().find(call.name);
  const double share = it != measured_memory_share().end()       ? it->second
                       : assumed != assumed_memory_share().end() ? assumed->second
                                                                 : kDefaultMemoryShare;
  const double s = std::max(memory_s(share), c.flops / (p.fp32_tflops * 1e12));
  m.ms = (s + launch_s) * 1e3;
  m.basis =
      cat("memory at ", pct(share), " of HBM", it != measured_memory_share().end() ? " (measured)" : " (assumed)");
  return m;
}

std::vector<KernelRow> kernel_rows(const std::vector<KernelCall>& calls, const GpuModel& gpu, Precision level,
                                   ModelAttention attention) {
  std::vector<KernelRow> rows;
  std::map<std::string, size_t> index;
  for (const KernelCall& c : calls) {
    const bool ours_as_cudnn =
        attention == ModelAttention::cudnn &&
        (c.cost.kind == kprof::Kind::attention_forward || c.cost.kind == kprof::Kind::attention_backward) &&
        c.name.rfind("cudnn", 0) != 0;
    const std::string name = ours_as_cudnn ? cat(c.name, " (modelled as cuDNN)") : c.name;
    auto [it, fresh] = index.emplace(name, rows.size());
    if (fresh) {
      rows.push_back({});
      rows.back().name = name;
      rows.back().kind = c.cost.kind;
    }
    KernelRow& r = rows[it->second];
    // cuDNN runs an attention call as one plan: one launch, as its calls on cuda count.
    KernelCall as_modelled = c;
    if (ours_as_cudnn) as_modelled.launches = 1;
    if (gone_when_captured(c, level)) as_modelled.launches = 0;
    ++r.calls;
    r.launches += as_modelled.launches;
    r.bytes += c.cost.bytes;
    r.flops += c.cost.flops;
    if (c.ms >= 0) r.measured_ms = std::max(r.measured_ms, 0.0) + c.ms;
    const ModelledCall m = model_call(gpu, as_modelled, level, attention);
    r.model_ms += m.ms;
    if (r.basis.empty()) r.basis = m.basis;
  }
  auto key = [](const KernelRow& r) { return r.measured_ms >= 0 ? r.measured_ms : r.model_ms; };
  std::stable_sort(rows.begin(), rows.end(), [&](const KernelRow& a, const KernelRow& b) { return key(a) > key(b); });
  return rows;
}

std::string kernel_table(const std::vector<KernelRow>& rows, const std::string& title) {
  KernelRow total;
  total.name = "total";
  bool measured = false;
  for (const KernelRow& r : rows) {
    total.calls += r.calls, total.launches += r.launches, total.bytes += r.bytes, total.flops += r.flops;
    total.model_ms += r.model_ms;
    if (r.measured_ms >= 0) measured = true, total.measured_ms = std::max(total.measured_ms, 0.0) + r.measured_ms;
  }
  auto num = [](double v, const char* fmt) {
    char b[32];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  // The measured column only where there is one; rates and shares are of it, else of the model's time.
  const double step_ms = measured ? total.measured_ms : total.model_ms;
  std::string out = title + "\n";
  auto line = [&](const std::string& name, const std::string& calls, const std::string& launches, const std::string& mb,
                  const std::string& gflop, const std::string& ms, const std::string& model, const std::string& gbps,
                  const std::string& tflops, const std::string& share, const std::string& basis) {
    char b[640];
    char ms_column[24] = "";
    if (measured) std::snprintf(ms_column, sizeof ms_column, " %9s", ms.c_str());
    std::snprintf(b, sizeof b, "%-44s %6s %8s %10s %10s%s %9s %8s %8s %6s  %s", name.c_str(), calls.c_str(),
                  launches.c_str(), mb.c_str(), gflop.c_str(), ms_column, model.c_str(), gbps.c_str(), tflops.c_str(),
                  share.c_str(), basis.c_str());
    std::string l = b;
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l;
    out += '\n';
  };
  line("kernel", "calls", "launches", "MB", "GFLOP", "ms", "model ms", "GB/s", "TFLOP/s", "share", "model basis");
  auto add = [&](const KernelRow& r) {
    const double ms = measured ? r.measured_ms : r.model_ms;
    const double gbps = ms > 0 ? r.bytes / (ms * 1e-3) / 1e9 : 0, tflops = ms > 0 ? r.flops / (ms * 1e-3) / 1e12 : 0;
    line(r.name.size() > 44 ? r.name.substr(0, 41) + "..." : r.name, num(double(r.calls), "%.0f"),
         num(double(r.launches), "%.0f"), num(r.bytes / 1e6, "%.1f"), num(r.flops / 1e9, "%.2f"),
         num(r.measured_ms, "%.3f"), num(r.model_ms, "%.3f"), num(gbps, "%.0f"), num(tflops, "%.2f"),
         step_ms > 0 && ms >= 0 ? num(100.0 * ms / step_ms, "%.1f%%") : "", r.basis);
  };
  for (const KernelRow& r : rows) add(r);
  add(total);
  return out;
}

}  // namespace eng
