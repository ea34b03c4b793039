// cuDNN as the vendor baseline (kernels/cudnn/cudnn.h), and the engine's
// attention(..., AttentionImpl::cudnn).
// Host side, every build (what CI checks without a GPU): the shapes cuDNN's
// attention takes, the reason it cannot run in this process (no cuDNN path,
// no library, no GPU), and that asking for it where it cannot run is an
// error that says so, never a silent fallback to our kernel.
// [gpu]: cuDNN's attention against our fused kernel on the same GPU and the
// cpu reference (f32 math on the rounded inputs), forward and the three
// gradients, causal and not, bf16 and f16, with a ragged T; and cuDNN's
// softmax against ours. Tolerances as tests/kernels/test_attention_emu.cpp
// (the forward one rounding of the output; the gradients 4x, as both
// implementations read the stored, rounded O for D = rowsum(dO * O)).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/device.h"
#include "engine/ops.h"
#include "kernels/cudnn/cudnn.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

SdpaShape shape(int64_t B, int64_t T, int64_t NH, int64_t HS, gpu::Storage st) {
  SdpaShape s;
  s.B = B, s.T = T, s.NH = NH, s.HS = HS, s.st = st;
  return s;
}

// The message of the eng::Error f throws ("" if none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cudnn: the attention shapes cuDNN takes are checked on the host", "[cudnn]") {
  constexpr auto bf16 = gpu::Storage::bf16, f16 = gpu::Storage::f16, f32 = gpu::Storage::f32;
  CHECK(cudnn_sdpa_unsupported(shape(2, 1024, 12, 64, bf16)).empty());
  CHECK(cudnn_sdpa_unsupported(shape(1, 37, 3, 128, f16)).empty());
  CHECK(cudnn_sdpa_unsupported(shape(1, 1, 1, 8, bf16)).empty());  // one query, one key
  CHECK_THAT(cudnn_sdpa_unsupported(shape(2, 64, 4, 64, f32)), Catch::Matchers::Contains("bf16 or fp16"));
  CHECK_THAT(cudnn_sdpa_unsupported(shape(2, 64, 4, 12, bf16)), Catch::Matchers::Contains("not a multiple of 8"));
  CHECK_THAT(cudnn_sdpa_unsupported(shape(2, 64, 4, 136, bf16)), Catch::Matchers::Contains("above 128"));
  CHECK_THAT(cudnn_sdpa_unsupported(shape(0, 64, 4, 64, bf16)), Catch::Matchers::Contains("at least 1"));
  CHECK_THAT(cudnn_sdpa_unsupported(shape(2, 0, 4, 64, bf16)), Catch::Matchers::Contains("T=0"));
  SdpaShape s = shape(2, 1024, 12, 64, f16);
  s.mask = gpu::AttentionMask::none;
  CHECK(s.str() == "B=2 T=1024 NH=12 HS=64 f16 full");
}

TEST_CASE("cudnn: without a GPU, cuDNN says why it is unavailable", "[cudnn]") {
  if (cuda_available()) return;  // a GPU machine: the [gpu] cases below cover it
  const std::string why = cudnn_unavailable_reason();
  INFO(why);
  REQUIRE_FALSE(why.empty());
  if (!cudnn_built()) {
    CHECK_THAT(why, Catch::Matchers::Contains("no cuDNN") || Catch::Matchers::Contains("no CUDA"));
  } else if (!std::getenv("ENGINE_CUDNN_LIBRARY")) {
    // The toolkit's cuDNN 9 loads (a CUDA build needs it for CI's frontend
    // checks below); the GPU is what is missing.
    CHECK_THAT(why, Catch::Matchers::Contains("no GPU answers (cuDNN 9."));
  }
  CHECK_THROWS_WITH(CudnnContext(0), Catch::Matchers::Contains(why));
  // A version only where the library loaded.
  CHECK(cudnn_version().empty() == (!cudnn_built() || why.find("cannot load") != std::string::npos));
}

// The frontend dlopens a libcudart of its own choosing (libcudart.so.12
// first); the loader pins it to the runtime this process already runs on, so
// the frontend's streams and current device are ours. Checked against the
// kernel's list of this process's mappings, not the loader's own search.
TEST_CASE("cudnn: the frontend is pointed at the CUDA runtime this process has loaded", "[cudnn]") {
  if (!cudnn_built()) return;
  const bool set_before = std::getenv("CUDNN_FRONTEND_CUDART_LIB_NAME") != nullptr;
  (void)cudnn_unavailable_reason();  // loads libcudnn and pins the runtime
  if (set_before) return;            // the user's choice stands (setenv without overwrite)
  const char* lib = std::getenv("CUDNN_FRONTEND_CUDART_LIB_NAME");
  REQUIRE(lib);
  INFO(lib);
  CHECK(std::string(lib).find("libcudart.so") != std::string::npos);
  std::error_code ec;
  const std::string real = std::filesystem::canonical(lib, ec).string();
  REQUIRE_FALSE(ec);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool mapped = false;
  while (std::getline(maps, line)) mapped = mapped || (line.size() >= real.size() && line.ends_with(real));
  CHECK(mapped);
}

// Hidden ([.]): the loader answers once per process, so ctest runs this alone
// with ENGINE_CUDNN_LIBRARY naming a library that is not there
// (tests/CMakeLists.txt: kernels.cudnn_missing_library).
TEST_CASE("cudnn: a library that cannot be loaded is named in the reason", "[.cudnn_missing]") {
  const char* lib = std::getenv("ENGINE_CUDNN_LIBRARY");
  REQUIRE(lib);
  const std::string why = cudnn_unavailable_reason();
  INFO(why);
  if (!cudnn_built()) {
    CHECK_THAT(why, Catch::Matchers::Contains("no cuDNN") || Catch::Matchers::Contains("no CUDA"));
    return;
  }
  CHECK_THAT(why, Catch::Matchers::Contains(std::string("cannot load ") + lib) &&
                      Catch::Matchers::Contains("ENGINE_CUDNN_LIBRARY"));
  CHECK(cudnn_version().empty());
  CHECK_THROWS_WITH(CudnnContext(0), Catch::Matchers::Contains(why));
}

TEST_CASE("cudnn: attention with AttentionImpl::cudnn off the cuda device is an error, not a fallback", "[cudnn]") {
  const Shape s{1, 8, 2, 16};
  for (Device dev : {kCPU, Device{DeviceType::emu, 0}}) {
    for (DType t : {DType::f32, DType::bf16}) {
      if (dev.type == DeviceType::cpu && t != DType::f32) continue;  // the cpu computes in f32/f64 only
      INFO(dev.str() << " " << dtype_name(t));
      const Tensor q = Tensor::randn(s, 1).to(t).to(dev), k = Tensor::randn(s, 2).to(t).to(dev),
                   v = Tensor::randn(s, 3).to(t).to(dev);
      const std::string e = error_of([&] { attention(q, k, v, Causal::yes, AttentionImpl::cudnn); });
      CHECK_THAT(
          e, Catch::Matchers::Contains("cuDNN runs on the cuda device only") && Catch::Matchers::Contains(dev.str()));
    }
  }
  CHECK(parse_attention_impl("ours") == AttentionImpl::ours);
  CHECK(parse_attention_impl("cudnn") == AttentionImpl::cudnn);
  CHECK(std::string(attention_impl_name(AttentionImpl::cudnn)) == "cudnn");
  CHECK_THROWS_WITH(parse_attention_impl("flash"), Catch::Matchers::Contains("ours, ours_cuda_cores or cudnn"));
}

// ---- on a GPU -------------------------------------------------------------

namespace {
bool cudnn_or_skip() {
  if (!cuda_available()) {
    WARN("skipped: no CUDA device answers" << (cuda_built() ? "" : " (and this build has no CUDA)"));
    return false;
  }
  const std::string why = cudnn_unavailable_reason();
  // A GPU without cuDNN: the test fails, naming why (a GPU machine is where these must run).
  INFO("cuDNN unavailable: " << why);
  REQUIRE(why.empty());
  return true;
}
const Device kCuda{DeviceType::cuda, 0};

// NKV < NH: grouped-query attention, k and v with NKV heads (0: NH).
void check_cudnn_attention(int64_t B, int64_t T, int64_t NH, int64_t HS, DType t, Causal causal, uint64_t seed,
                           int64_t NKV = 0) {
  INFO(dtype_name(t) << " B = " << B << " T = " << T << " NH = " << NH << " NKV = " << (NKV ? NKV : NH)
                     << " HS = " << HS << (causal == Causal::yes ? " causal" : " full"));
  const Shape s{B, T, NH, HS}, kv{B, T, NKV ? NKV : NH, HS};
  const Tensor q0 = Tensor::randn(s, seed, 1.5f), k0 = Tensor::randn(kv, seed + 1, 1.5f),
               v0 = Tensor::randn(kv, seed + 2), g0 = Tensor::randn(s, seed + 3);
  auto leaf = [](const Tensor& x) { return x.detach().set_requires_grad(true); };
  // The reference: f32 math on the rounded inputs, on the cpu.
  Tensor qr = leaf(rounded(q0, t)), kr = leaf(rounded(k0, t)), vr = leaf(rounded(v0, t));
  Tensor ref = attention(qr, kr, vr, causal);
  ref.backward(rounded(g0, t));
  auto on_gpu = [&](AttentionImpl impl) {
    Tensor q = leaf(q0.to(t).to(kCuda)), k = leaf(k0.to(t).to(kCuda)), v = leaf(v0.to(t).to(kCuda));
    Tensor out = attention(q, k, v, causal, impl);
    out.backward(g0.to(t).to(kCuda));
    return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
  };
  const std::vector<Tensor> vendor = on_gpu(AttentionImpl::cudnn), ours = on_gpu(AttentionImpl::ours);
  const std::vector<Tensor> refs{ref, qr.grad(), kr.grad(), vr.grad()};
  const Tol ft = tol_for(t);
  for (size_t i = 0; i < 4; ++i) {
    INFO((i == 0 ? "out" : i == 1 ? "dq" : i == 2 ? "dk" : "dv"));
    const double tol = i == 0 ? ft.rtol : 4 * ft.rtol;
    CHECK(vendor[i].dtype() == t);
    CHECK_CLOSE(values(vendor[i].to(kCPU)), values(refs[i]), tol, tol);
    CHECK_CLOSE(values(vendor[i].to(kCPU)), values(ours[i].to(kCPU)), 2 * tol, 2 * tol);
  }
}
}  // namespace

TEST_CASE("cuda: cuDNN attention matches ours and the cpu reference, forward and gradients", "[gpu]") {
  if (!cudnn_or_skip()) return;
  for (DType t : {DType::bf16, DType::f16})
    for (Causal c : {Causal::yes, Causal::no}) {
      check_cudnn_attention(2, 67, 3, 64, t, c, 10);  // a ragged T
      check_cudnn_attention(1, 128, 2, 128, t, c, 20);
      check_cudnn_attention(2, 16, 4, 32, t, c, 30);
    }
}

TEST_CASE("cuda: cuDNN grouped-query attention matches ours and the cpu reference, forward and gradients", "[gpu]") {
  if (!cudnn_or_skip()) return;
  for (DType t : {DType::bf16, DType::f16})
    for (Causal c : {Causal::yes, Causal::no}) {
      check_cudnn_attention(2, 67, 4, 64, t, c, 50, 2);    // groups of 2, a ragged T
      check_cudnn_attention(1, 128, 8, 128, t, c, 60, 2);  // groups of 4
      check_cudnn_attention(2, 33, 4, 64, t, c, 70, 1);    // multi-query
    }
  // Packed as the Llama's qkv projection writes it, (B, T, (NH + 2 NKV) HS): equals the same three apart.
  const int64_t B = 2, T = 67, NH = 4, NKV = 2, HS = 64, C = NH * HS, Ckv = NKV * HS;
  for (Causal c : {Causal::yes, Causal::no}) {
    const Tensor g = Tensor::randn({B, T, NH, HS}, 81).to(DType::bf16).to(kCuda);
    Tensor packed = Tensor::randn({B, T, C + 2 * Ckv}, 80, 1.5f).to(DType::bf16).to(kCuda).set_requires_grad(true);
    Tensor split_in = packed.detach().set_requires_grad(true);
    const Tensor a = attention_qkv(packed, NH, c, AttentionImpl::cudnn, NKV);
    a.backward(g);
    const std::vector<Tensor> p = split(split_in, {C, Ckv, Ckv}, -1);
    const Tensor b = attention(p[0].reshape({B, T, NH, HS}), p[1].reshape({B, T, NKV, HS}),
                               p[2].reshape({B, T, NKV, HS}), c, AttentionImpl::cudnn);
    b.backward(g);
    const Tol ft = tol_for(DType::bf16);
    CHECK_CLOSE(values(a.to(kCPU)), values(b.to(kCPU)), ft.rtol, ft.rtol);
    CHECK_CLOSE(values(packed.grad().to(kCPU)), values(split_in.grad().to(kCPU)), 4 * ft.rtol, 4 * ft.rtol);
  }
}

TEST_CASE("cuda: cuDNN attention on a packed qkv (read and written in place) equals split + attention", "[gpu]") {
  if (!cudnn_or_skip()) return;
  const int64_t B = 2, T = 67, NH = 3, HS = 64, C = NH * HS;
  for (DType t : {DType::bf16, DType::f16})
    for (Causal c : {Causal::yes, Causal::no}) {
      INFO(dtype_name(t) << (c == Causal::yes ? " causal" : " full"));
      const Tensor g = Tensor::randn({B, T, NH, HS}, 41).to(t).to(kCuda);
      Tensor packed = Tensor::randn({B, T, 3 * C}, 40, 1.5f).to(t).to(kCuda).set_requires_grad(true);
      Tensor split_in = packed.detach().set_requires_grad(true);
      const Tensor a = attention_qkv(packed, NH, c, AttentionImpl::cudnn);
      a.backward(g);
      const std::vector<Tensor> p = split(split_in, {C, C, C}, -1);
      const Shape heads{B, T, NH, HS};
      const Tensor b =
          attention(p[0].reshape(heads), p[1].reshape(heads), p[2].reshape(heads), c, AttentionImpl::cudnn);
      b.backward(g);
      // cuDNN's kernels may differ with the strides: within the dtype's tolerance.
      const Tol ft = tol_for(t);
      CHECK_CLOSE(values(a.to(kCPU)), values(b.to(kCPU)), ft.rtol, ft.rtol);
      CHECK_CLOSE(values(packed.grad().to(kCPU)), values(split_in.grad().to(kCPU)), 4 * ft.rtol, 4 * ft.rtol);
    }
}

TEST_CASE("cuda: cuDNN attention refuses f32 and odd head sizes with a one-line reason", "[gpu]") {
  if (!cudnn_or_skip()) return;
  const Shape s{1, 16, 2, 12};
  const Tensor x = Tensor::randn(s, 1).to(DType::bf16).to(kCuda);
  CHECK_THROWS_WITH(attention(x, x, x, Causal::yes, AttentionImpl::cudnn),
                    Catch::Matchers::Contains("not a multiple of 8"));
  const Tensor f = Tensor::randn({1, 16, 2, 16}, 1).to(kCuda);
  CHECK_THROWS_WITH(attention(f, f, f, Causal::yes, AttentionImpl::cudnn), Catch::Matchers::Contains("bf16 or f16"));
}

TEST_CASE("cuda: cuDNN softmax matches ours, forward and backward", "[gpu]") {
  if (!cudnn_or_skip()) return;
  CudnnContext ctx(0);
  for (DType t : {DType::f32, DType::f16}) {  // the workbench's row is f32
    INFO(dtype_name(t));
    const int64_t rows = 37, C = 1001;
    const Tensor x = Tensor::randn({rows, C}, 5, 2.f).to(t).to(kCuda), dy = Tensor::randn({rows, C}, 6).to(t).to(kCuda);
    const Tensor y = Tensor::empty({rows, C}, t, kCuda), dx = Tensor::empty({rows, C}, t, kCuda);
    cudnn_softmax_forward(ctx, gpu::storage_of(t), x.data_ptr(), y.data_ptr(), rows, C, nullptr);
    cudnn_softmax_backward(ctx, gpu::storage_of(t), y.data_ptr(), dy.data_ptr(), dx.data_ptr(), rows, C, nullptr);
    Tensor xr = rounded(x.to(kCPU), t).set_requires_grad(true);
    Tensor yr = softmax(xr);
    yr.backward(rounded(dy.to(kCPU), t));
    CHECK_EMU_CLOSE(y, yr, t);
    const Tol ft = tol_for(t);
    CHECK_CLOSE(values(dx.to(kCPU)), values(xr.grad()), 4 * ft.atol, 4 * ft.rtol);
  }
}

namespace {
// Whether the frontend checks can run: a build with the cuDNN path and the
// library loadable. A CUDA build whose cuDNN does not load fails here, so the
// checks cannot vanish silently.
bool frontend_checks_run() {
  if (!cudnn_built()) return false;
  INFO(cudnn_unavailable_reason());
  REQUIRE_FALSE(cudnn_version().empty());
  return true;
}
}  // namespace

TEST_CASE("cudnn: the attention graphs pass the cuDNN frontend's validation for A100 and H100", "[cudnn]") {
  if (!frontend_checks_run()) return;
  for (int sm : {80, 90})
    for (gpu::Storage st : {gpu::Storage::bf16, gpu::Storage::f16})
      for (gpu::AttentionMask mask : {gpu::AttentionMask::causal, gpu::AttentionMask::none})
        for (SdpaPass pass : {SdpaPass::forward, SdpaPass::backward}) {
          SdpaShape s = shape(2, 1024, 12, 64, st);
          s.mask = mask;
          INFO("sm" << sm << " " << s.str() << (pass == SdpaPass::forward ? " forward" : " backward"));
          CHECK(cudnn_sdpa_validate(s, pass, sm) == "");
          s.packed = true;  // GPT-2's qkv read in place, its gradient written in place
          CHECK(cudnn_sdpa_validate(s, pass, sm) == "");
          s.packed = false;
          s.T = 67;  // ragged
          s.HS = 128;
          CHECK(cudnn_sdpa_validate(s, pass, sm) == "");
        }
  // Our host check comes first and names the rule.
  CHECK_THAT(cudnn_sdpa_validate(shape(1, 64, 2, 160, gpu::Storage::bf16), SdpaPass::backward, 90),
             Catch::Matchers::Contains("above 128"));
}

// Grouped-query attention (the Llama's): k and v with fewer heads, apart or
// packed as (B, T, (NH + 2 NKV) HS), groups of 2 and 4, multi-query (1 K/V
// head), causal and full; the Llama 3.2 1B shape (32 heads, 8 K/V, HS 64).
TEST_CASE("cudnn: the grouped-query attention graphs pass the cuDNN frontend's validation for A100 and H100",
          "[cudnn]") {
  if (!frontend_checks_run()) return;
  for (int sm : {80, 90})
    for (SdpaPass pass : {SdpaPass::forward, SdpaPass::backward})
      for (int64_t nkv : {1, 2, 4})
        for (bool packed : {false, true})
          for (gpu::AttentionMask mask : {gpu::AttentionMask::causal, gpu::AttentionMask::none}) {
            SdpaShape s = shape(2, 256, 8, 64, gpu::Storage::bf16);
            s.NKV = nkv, s.packed = packed, s.mask = mask;
            INFO("sm" << sm << " " << s.str() << (pass == SdpaPass::forward ? " forward" : " backward"));
            CHECK(cudnn_sdpa_validate(s, pass, sm) == "");
          }
  SdpaShape llama = shape(1, 2048, 32, 64, gpu::Storage::bf16);
  llama.NKV = 8, llama.packed = true;
  for (SdpaPass pass : {SdpaPass::forward, SdpaPass::backward}) CHECK(cudnn_sdpa_validate(llama, pass, 90) == "");
  SdpaShape bad = shape(1, 64, 6, 64, gpu::Storage::bf16);
  bad.NKV = 4;  // does not divide 6
  CHECK_THAT(cudnn_sdpa_validate(bad, SdpaPass::forward, 90), Catch::Matchers::Contains("do not divide"));
}

TEST_CASE("cudnn: the layernorm graphs pass the cuDNN frontend's validation", "[cudnn]") {
  if (!frontend_checks_run()) return;
  for (int sm : {80, 90})
    for (LayernormPass pass : {LayernormPass::forward, LayernormPass::backward}) {
      INFO("sm" << sm << (pass == LayernormPass::forward ? " forward" : " backward"));
      CHECK(cudnn_layernorm_validate(4096, 768, pass, sm) == "");
      CHECK(cudnn_layernorm_validate(37, 83, pass, sm) == "");
    }
  CHECK(cudnn_layernorm_validate(0, 768, LayernormPass::forward, 90) == "every size must be at least 1");
}

TEST_CASE("cuda: cuDNN layernorm matches the cpu reference, forward and backward", "[gpu]") {
  if (!cudnn_or_skip()) return;
  CudnnContext ctx(0);
  const int64_t N = 64, C = 768;  // GPT-2's width
  const Tensor x = Tensor::randn({N, C}, 1), w = Tensor::randn({C}, 2, 0.2f), b = Tensor::randn({C}, 3, 0.2f);
  const Tensor dy = Tensor::randn({N, C}, 4);
  auto ws = [&](LayernormPass p) { return Tensor::scratch(cudnn_layernorm_workspace(ctx, N, C, p), kCuda); };
  const Tensor xd = x.to(kCuda), wd = w.to(kCuda), bd = b.to(kCuda), dyd = dy.to(kCuda);
  const Tensor y = Tensor::empty({N, C}, DType::f32, kCuda), mean = Tensor::empty({N}, DType::f32, kCuda),
               rstd = Tensor::empty({N}, DType::f32, kCuda);
  const Tensor wf = ws(LayernormPass::forward), wb = ws(LayernormPass::backward);
  cudnn_layernorm_forward(ctx, xd.data<float>(), wd.data<float>(), bd.data<float>(), y.data<float>(),
                          mean.data<float>(), rstd.data<float>(), N, C, 1e-5, wf.data_ptr(), nullptr);
  const Tensor dx = Tensor::empty({N, C}, DType::f32, kCuda), dw = Tensor::empty({C}, DType::f32, kCuda),
               db = Tensor::empty({C}, DType::f32, kCuda);
  cudnn_layernorm_backward(ctx, dyd.data<float>(), xd.data<float>(), wd.data<float>(), mean.data<float>(),
                           rstd.data<float>(), dx.data<float>(), dw.data<float>(), db.data<float>(), N, C,
                           wb.data_ptr(), nullptr);
  Tensor xr = x.detach().set_requires_grad(true), wr = w.detach().set_requires_grad(true),
         br = b.detach().set_requires_grad(true);
  Tensor yr = layernorm(xr, wr, br);
  yr.backward(dy);
  CHECK_CLOSE(values(y.to(kCPU)), values(yr), 1e-5, 1e-5);
  CHECK_CLOSE(values(dx.to(kCPU)), values(xr.grad()), 1e-4, 1e-4);
  CHECK_CLOSE(values(dw.to(kCPU)), values(wr.grad()), 1e-4, 1e-4);
  CHECK_CLOSE(values(db.to(kCPU)), values(br.grad()), 1e-4, 1e-4);
}
