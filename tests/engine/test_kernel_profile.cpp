// The step profile's recording (engine/kernel_profile.h) and the GPU model's
// arithmetic (engine/gpu_model.h), against figures computed here by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/gpu_model.h"
#include "engine/graph.h"
#include "engine/kernel_profile.h"
#include "engine/ops.h"
#include "kernels/cuda/elementwise.h"

using namespace eng;

namespace {
const Device kEmu{DeviceType::emu, 0};
}

TEST_CASE("kernel profile: one call per launcher with its formula's cost; outer scopes own the inner", "[profile]") {
  const int64_t n = 1000, M = 8, K = 16, N = 24;
  const Tensor a = Tensor::full({n}, 1.0, DType::f32, kEmu), b = Tensor::full({n}, 2.0, DType::f32, kEmu);
  const Tensor x = Tensor::full({M, K}, 1.0, DType::bf16, kEmu), w = Tensor::full({N, K}, 1.0, DType::bf16, kEmu);
  KernelProfile prof(kEmu);
  prof.start();
  const Tensor s = add(a, b);     // add_forward: 3 n floats
  const Tensor y = linear(x, w);  // one GEMM, its tiled_gemm call inside the "gemm" scope
  {
    const kprof::Scope outer("outer", kprof::memory(5));
    ENGINE_GPU_CALL(kEmu, add_forward, gpu::Storage::f32, a.data_ptr(), b.data_ptr(), s.data_ptr(), n, nullptr);
  }
  // A launch that bypasses ENGINE_GPU_CALL: counted on its own row.
  emuk::add_forward(gpu::Storage::f32, a.data_ptr(), b.data_ptr(), s.data_ptr(), n, nullptr);
  prof.stop();
  const std::vector<KernelCall>& c = prof.calls();
  REQUIRE(c.size() == 4);
  CHECK(c[0].name == "add_forward");
  CHECK(c[0].cost.bytes == 12.0 * n);
  CHECK(c[0].launches == 1);
  CHECK(c[1].name == "gemm 8x24x16");
  CHECK(c[1].cost.kind == kprof::Kind::gemm);
  CHECK(c[1].cost.flops == 2.0 * M * N * K);
  CHECK(c[1].cost.bytes == 2.0 * (M * K + K * N + M * N));  // bf16, each operand once
  CHECK(c[1].launches == 1);
  CHECK(c[2].name == "outer");
  CHECK(c[2].cost.bytes == 5);
  CHECK(c[2].launches == 1);
  CHECK(c[3].name == kUnattributed);
  CHECK(c[3].launches == 1);
  CHECK(c[0].ms == -1);  // emu: nothing measured
  // Not listening any more: nothing is recorded.
  (void)add(a, b);
  CHECK(prof.calls().size() == 4);
}

TEST_CASE("gpu model: a call's time from its bytes, FLOPs and launches", "[profile]") {
  const GpuModel h100 = gpu_model("H100");
  CHECK(h100.peak->hbm_gbps == 3350);
  KernelCall mem{"fill_inplace", kprof::memory(1e9), 3, -1};
  // 3 launches x 2 us + 1 GB at 80% of 3350 GB/s.
  CHECK(model_call(h100, mem, Precision::O3, ModelAttention::as_run).ms ==
        Approx(3 * 2e-3 + 1e9 / (0.8 * 3350e9) * 1e3));
  mem.name = "layernorm_backward";  // measured at 17.9% of HBM
  CHECK(model_call(h100, mem, Precision::O3, ModelAttention::as_run).ms ==
        Approx(3 * 2e-3 + 1e9 / (0.179 * 3350e9) * 1e3));

  kprof::Cost g;
  g.kind = kprof::Kind::gemm, g.flops = 1e12, g.bytes = 1e6, g.elem_bytes = 2;
  KernelCall gemm{"gemm", g, 1, -1};
  const double aligned = model_call(h100, gemm, Precision::O3, ModelAttention::as_run).ms;
  CHECK(aligned == Approx(2e-3 + 1e12 / (0.60 * 989e12) * 1e3));
  gemm.cost.aligned = false;
  CHECK(model_call(h100, gemm, Precision::O3, ModelAttention::as_run).ms - 2e-3 == Approx((aligned - 2e-3) / 0.40));
  gemm.cost.aligned = true, gemm.cost.elem_bytes = 4;  // fp32 storage: TF32 at O1, FP32 at O0
  CHECK(model_call(h100, gemm, Precision::O1, ModelAttention::as_run).ms ==
        Approx(2e-3 + 1e12 / (0.69 * 495e12) * 1e3));
  CHECK(model_call(h100, gemm, Precision::O0, ModelAttention::as_run).ms == Approx(2e-3 + 1e12 / (0.65 * 67e12) * 1e3));

  kprof::Cost at;
  at.kind = kprof::Kind::attention_backward, at.flops = 1e11;
  const KernelCall attn{"attention_backward", at, 3, -1};
  CHECK(model_call(h100, attn, Precision::O3, ModelAttention::as_run).ms == Approx(6e-3 + 1e11 / 6.2e12 * 1e3));
  CHECK(model_call(h100, attn, Precision::O3, ModelAttention::cudnn).ms == Approx(6e-3 + 1e11 / 206e12 * 1e3));

  // A host node waits 20 us (assumed); an eager upload's is not in a captured step.
  kprof::Cost h;
  h.kind = kprof::Kind::host;
  const KernelCall host{"host node", h, 2, -1}, upload_node{kUploadHostNode, h, 2, -1};
  CHECK(model_call(h100, host, Precision::O3, ModelAttention::as_run).ms == Approx(2 * 20e-3));
  CHECK(model_call(h100, upload_node, Precision::O2, ModelAttention::as_run).ms == Approx(2 * 20e-3));
  CHECK(model_call(h100, upload_node, Precision::O3, ModelAttention::as_run).ms == 0);
  for (const Precision level : {Precision::O2, Precision::O3}) {
    const std::vector<KernelRow> r = kernel_rows({upload_node}, h100, level, ModelAttention::as_run);
    REQUIRE(r.size() == 1);
    CHECK(r[0].calls == 1);
    CHECK(r[0].launches == (level == Precision::O3 ? 0 : 2));
  }

  // The rows: by name, times summed, the longest first; the cuDNN variant renames ours.
  const std::vector<KernelRow> rows = kernel_rows({mem, attn, mem}, h100, Precision::O3, ModelAttention::cudnn);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].name == "layernorm_backward");
  CHECK(rows[0].calls == 2);
  CHECK(rows[0].launches == 6);
  CHECK(rows[1].name == "attention_backward (modelled as cuDNN)");
  const std::string table = kernel_table(rows, "title");
  CHECK_THAT(table, Catch::Contains("total"));
  CHECK_THAT(table, Catch::Contains("memory at 18% of HBM (measured)"));
}

TEST_CASE("gpu model: an unknown GPU is a one-line error naming the choices", "[profile]") {
  CHECK(gpu_model("a100").peak->hbm_gbps == 2039);
  CHECK_THROWS_WITH(gpu_model("v100"), Catch::Contains("model_gpu 'v100': expected h100, h200 or a100"));
}

// The recorded steps of the model's checks: rows of calls of one name, each
// GEMM row one shape, so modelling a row's sums is modelling its calls.
static std::vector<KernelCall> recorded_calls(const nlohmann::json& rows) {
  std::vector<KernelCall> calls;
  for (const auto& r : rows) {
    KernelCall c;
    c.name = r["name"].get<std::string>();
    const std::string kind = r["kind"].get<std::string>();
    c.cost.kind = kind == "gemm"                 ? kprof::Kind::gemm
                  : kind == "attention_forward"  ? kprof::Kind::attention_forward
                  : kind == "attention_backward" ? kprof::Kind::attention_backward
                  : kind == "host"               ? kprof::Kind::host
                                                 : kprof::Kind::memory;
    c.cost.bytes = r["bytes"].get<double>(), c.cost.flops = r["flops"].get<double>();
    c.cost.elem_bytes = 2;  // O3: every GEMM in bf16
    c.cost.aligned = c.name.find("unaligned") == std::string::npos;
    c.launches = r["launches"].get<int64_t>();
    calls.push_back(c);
  }
  return calls;
}
static nlohmann::json fixture(const std::string& name) {
  std::ifstream f(std::string(ENGINE_FIXTURE_DIR) + "/" + name);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}
static double modelled_ms(const std::vector<KernelCall>& calls, const std::string& gpu, ModelAttention a) {
  double ms = 0;
  for (const KernelRow& r : kernel_rows(calls, gpu_model(gpu), Precision::O3, a)) ms += r.model_ms;
  return ms;
}

// The model's check against the first measured step: GPT-2 124M at B 8 x
// 1024, O3, on the H100 (docs/gpu.md), whose profile was recorded with our
// CUDA-core attention (the cuDNN figure models those calls as cuDNN's). The
// model must land within 25% of the measured times before it judges a
// change to the step.
TEST_CASE("gpu model: GPT-2 124M's recorded step lands within 25% of the H100's measured step", "[profile]") {
  const nlohmann::json j = fixture("kernel_profile_gpt2_124m_h100.json");
  const std::vector<KernelCall> calls = recorded_calls(j["rows"]);
  const double ours = modelled_ms(calls, "h100", ModelAttention::as_run);
  const double cudnn = modelled_ms(calls, "h100", ModelAttention::cudnn);
  const double measured_ours = j["measured_ms"]["ours"].get<double>();
  const double measured_cudnn = j["measured_ms"]["cudnn"].get<double>();
  INFO("modelled " << ours << " ms (ours), " << cudnn << " ms (cuDNN); measured " << measured_ours << ", "
                   << measured_cudnn);
  CHECK(measured_ours == Approx(8192 / 68.9e3 * 1e3));  // docs/gpu.md: 68.9k and 195k tokens/s
  CHECK(measured_cudnn == Approx(8192 / 195e3 * 1e3));
  CHECK(std::abs(ours / measured_ours - 1) <= 0.25);
  CHECK(std::abs(cudnn / measured_cudnn - 1) <= 0.25);
}

// The second: the same step on the H200, profiled on cuda with each
// attention (docs/gpu.md, the second run), against one CUDA graph replay of
// it. Its memory-bound kernels' shares and the attention rates come from
// this step, so what it checks independently is the rest: the GEMMs at
// cuBLASLt's workbench rate, the launches and host nodes, and the events'
// sum against the graph's replay.
// The third: the same step after the changes of the second run's list and
// those after the third run's first call (docs/gpu.md, the third run), cuDNN's
// attention, against its replay. Its kernels' shares are the model's, so
// again the GEMMs, launches and the events against the replay are what it
// checks.
TEST_CASE("gpu model: GPT-2 124M's step on the H200 after the third run's changes lands within 25% of its replay",
          "[profile]") {
  const nlohmann::json j = fixture("kernel_profile_gpt2_124m_h200_third.json");
  const double model = modelled_ms(recorded_calls(j["rows_cudnn"]), "h200", ModelAttention::as_run);
  const double measured = j["measured_ms"]["cudnn"].get<double>();
  INFO("modelled " << model << " ms, measured " << measured);
  CHECK(measured == Approx(15.6338));  // docs/gpu.md: the third run's B 8 step, replayed
  CHECK(std::abs(model / measured - 1) <= 0.25);
}

// The fourth: the config's whole step (64 x 1024 x 8, 524,288 tokens, cuDNN's
// attention) on the H200 (docs/gpu.md, the fourth run's first call), the
// step bench/gpu_forecast.py starts from. Its shares were measured at B 8
// (layernorm's backward reached 28% there, 50% at this shape), so this one
// checks the model away from the shape it was fitted on, against the replay.
TEST_CASE("gpu model: GPT-2 124M's config step (64 x 1024 x 8) lands within 25% of its replay on the H200",
          "[profile]") {
  const nlohmann::json j = fixture("kernel_profile_gpt2_124m_h200_config.json");
  const std::vector<KernelCall> calls = recorded_calls(j["rows_cudnn"]);
  const double model = modelled_ms(calls, "h200", ModelAttention::as_run);
  const double measured = j["measured_ms"]["cudnn"].get<double>();
  double events = 0;
  for (const auto& r : j["rows_cudnn"]) events += r["ms"].get<double>();
  INFO("modelled " << model << " ms, measured " << measured << " replayed, " << events << " in events");
  CHECK(measured == Approx(866.846));              // docs/gpu.md: the fourth run, the config's step replayed
  CHECK(events == Approx(859.462).epsilon(1e-4));  // the table's total row
  CHECK(std::abs(model / measured - 1) <= 0.25);
  CHECK(std::abs(events / measured - 1) <= 0.02);  // the eager events account for the replay
}

TEST_CASE("gpu model: GPT-2 124M's step on the H200 lands within 25% of its measured graph replay", "[profile]") {
  const nlohmann::json j = fixture("kernel_profile_gpt2_124m_h200.json");
  for (const char* attention : {"cudnn", "ours"}) {
    INFO(attention);
    const double model =
        modelled_ms(recorded_calls(j[std::string("rows_") + attention]), "h200", ModelAttention::as_run);
    const double measured = j["measured_ms"][attention].get<double>();
    INFO("modelled " << model << " ms, measured " << measured);
    CHECK(std::abs(model / measured - 1) <= 0.25);
  }
}
