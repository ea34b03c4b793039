// GEMM cases and the shape sweep (like stas00's mamf-finder: the Maximum
// Achievable Matmul FLOP/s over a range of shapes, not one lucky size).
// Formula, kernels/cuda/gemm.cu (tiled_gemm_kernel), per batch, with tile reuse:
//   bytes = sizeof(T) * (M K ceil(N/64) + K N ceil(M/64) + M N (beta != 0 ? 2 : 1))
//   flops = 2 M N K
// (kernels/gemm/gemm.h gives the no-reuse lower bound 4 (M K + K N + 2 M N).)
#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>

#include "bench/cases.h"
#include "engine/error.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm/gemm.h"

namespace eng::bench {

static double ceil_div(int64_t a, int64_t b) { return double((a + b - 1) / b); }

static double gemm_bytes(const GemmCall& g) {
  return 4.0 * (double(g.M * g.K) * ceil_div(g.N, 64) + double(g.K * g.N) * ceil_div(g.M, 64) +
                double(g.M * g.N) * (g.beta != 0.f ? 2 : 1));
}

// A row-major GemmCall for C (M, N) = op(A) op(B) as stored with ta/tb.
static GemmCall make_call(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K) {
  GemmCall g;
  g.ta = ta;
  g.tb = tb;
  g.M = M;
  g.N = N;
  g.K = K;
  g.lda = ta == Trans::N ? K : M;
  g.ldb = tb == Trans::N ? N : K;
  g.ldc = N;
  return g;
}

// One GEMM on any device: OpenBLAS on cpu, the hand-written tiled kernel on emu/cuda.
static void run_gemm(Device dev, const GemmCall& g, const Tensor& a, const Tensor& b, const Tensor& c) {
  if (dev.type == DeviceType::cpu)
    cpu::gemm_call<float>(g, a.data<float>(), b.data<float>(), c.data<float>());
  else
    ENGINE_GPU_CALL(dev, tiled_gemm, gpu::Storage::f32, g, a.data_ptr(), b.data_ptr(), c.data_ptr(), nullptr, nullptr);
}

static Case gemm_case(const std::string& name, const std::string& what, Trans ta, Trans tb, int64_t M, int64_t N,
                      int64_t K) {
  const GemmCall g = make_call(ta, tb, M, N, K);
  Case c;
  c.name = name;
  std::ostringstream s;
  s << what << " " << M << "x" << N << "x" << K << (ta == Trans::T ? " TA" : "") << (tb == Trans::T ? " TB" : "");
  c.shape = s.str();
  c.bytes = gemm_bytes(g);
  c.flops = 2.0 * double(M) * double(N) * double(K);
  c.bound = Bound::compute;
  // fp32 sums of K products in a different order: error grows like sqrt(K) ulps.
  c.atol = 1e-4;
  c.rtol = 1e-4;
  c.bind = [g](Device dev) {
    const Tensor a = randn({g.ta == Trans::N ? g.M : g.K, g.ta == Trans::N ? g.K : g.M}, 11, dev, 0.5f);
    const Tensor b = randn({g.tb == Trans::N ? g.K : g.N, g.tb == Trans::N ? g.N : g.K}, 12, dev, 0.5f);
    const Tensor out = Tensor::empty({g.M, g.N}, DType::f32, dev);
    return Runner{[=] { run_gemm(dev, g, a, b, out); }, [=] { return host(out); }};
  };
  return c;
}

// GPT-2 124M's linear layers at B*T = 4096 tokens (C = 768): x @ W^T as
// linear() calls it (TB), and the weight gradient dW = dY^T @ X (TA).
std::vector<Case> matmul_cases(bool quick) {
  if (quick)
    return {gemm_case("matmul_fwd", "x@W^T", Trans::N, Trans::T, 67, 96, 80),
            gemm_case("matmul_bwd_w", "dY^T@X", Trans::T, Trans::N, 96, 80, 67)};
  const int64_t BT = 4096, C = 768;
  return {gemm_case("matmul_fwd", "qkv", Trans::N, Trans::T, BT, 3 * C, C),
          gemm_case("matmul_fwd", "fc", Trans::N, Trans::T, BT, 4 * C, C),
          gemm_case("matmul_fwd", "proj", Trans::N, Trans::T, BT, C, 4 * C),
          gemm_case("matmul_bwd_w", "fc dW", Trans::T, Trans::N, 4 * C, C, BT)};
}

// --- the sweep ---------------------------------------------------------------

// A GEMM implementation the sweep can time. To add one (the cuBLASLt wrapper
// of kernels/gemm/cublaslt*, once it lands): append an entry whose run()
// calls it on a cuda device; the sweep does the rest.
struct GemmImpl {
  const char* name;
  Impl impl;
  std::function<void(const GemmCall&, const Tensor&, const Tensor&, const Tensor&)> run;
};

static std::vector<GemmImpl> sweep_impls() {
  std::vector<GemmImpl> impls{
      {"cpu", Impl::cpu,
       [](const GemmCall& g, const Tensor& a, const Tensor& b, const Tensor& c) { run_gemm(kCPU, g, a, b, c); }}};
  if (cuda_available())
    impls.push_back({"cuda", Impl::cuda, [](const GemmCall& g, const Tensor& a, const Tensor& b, const Tensor& c) {
                       run_gemm(impl_device(Impl::cuda), g, a, b, c);
                     }});
  return impls;
}

struct Range {
  int64_t lo, hi, step;
};

// "a:b:step" (b inclusive), "a:b" (step = a) or "a".
static Range parse_range(const std::string& s, Range dflt) {
  if (s.empty()) return dflt;
  std::vector<int64_t> f;
  std::istringstream in(s);
  std::string part;
  bool ok = true;
  while (std::getline(in, part, ':')) {
    size_t used = 0;
    try {
      f.push_back(std::stoll(part, &used));
    } catch (const std::exception&) {
      ok = false;
    }
    ok = ok && used == part.size();
  }
  ok = ok && !f.empty() && f.size() <= 3;
  const Range r = !ok ? Range{0, 0, 0} : Range{f[0], f.size() > 1 ? f[1] : f[0], f.size() > 2 ? f[2] : f[0]};
  ENGINE_CHECK(ok && r.lo >= 1 && r.hi >= r.lo && r.step >= 1, "--gemm-sweep: bad range '", s,
               "' (want a:b:step, a:b or a, with 1 <= a <= b, step >= 1)");
  return r;
}

static std::vector<int64_t> values(Range r) {
  std::vector<int64_t> v;
  for (int64_t x = r.lo; x <= r.hi; x += r.step) v.push_back(x);
  return v;
}

void gemm_sweep(Workbench& wb) {
  const Options& o = wb.options();
  const Range dflt = o.quick ? Range{64, 128, 64} : Range{512, 2048, 512};
  const std::vector<int64_t> ms = values(parse_range(o.m_range, dflt)), ns = values(parse_range(o.n_range, dflt)),
                             ks = values(parse_range(o.k_range, dflt));
  std::printf("\n== GEMM sweep: C = A @ B, f32, %zu shapes (M %lld..%lld, N %lld..%lld, K %lld..%lld)\n",
              ms.size() * ns.size() * ks.size(), (long long)ms.front(), (long long)ms.back(), (long long)ns.front(),
              (long long)ns.back(), (long long)ks.front(), (long long)ks.back());
  if (!cuda_available()) std::printf("cuda: no GPU answers (the sweep times the cpu only)\n");
  for (const GemmImpl& gi : sweep_impls()) {
    struct Point {
      double tflops;
      std::string shape;
    };
    std::vector<Point> pts;
    const Device dev = impl_device(gi.impl);
    for (int64_t M : ms)
      for (int64_t N : ns)
        for (int64_t K : ks) {
          const GemmCall g = make_call(Trans::N, Trans::N, M, N, K);
          const Tensor a = randn({M, K}, 21, dev, 0.5f), b = randn({K, N}, 22, dev, 0.5f);
          const Tensor c = Tensor::empty({M, N}, DType::f32, dev);
          Result r = make_result("gemm_sweep", gi.name,
                                 std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K), "f32");
          r.median_ms = median_ms([&] { gi.run(g, a, b, c); }, dev, o.warmup, o.repeats);
          wb.report(r, gemm_bytes(g), 2.0 * double(M) * double(N) * double(K), Bound::compute, gi.impl);
          pts.push_back({wb.results().back().tflops, r.shape});
        }
    std::sort(pts.begin(), pts.end(), [](const Point& x, const Point& y) { return x.tflops > y.tflops; });
    std::printf("gemm_sweep %s: best %.4f TFLOP/s (%s), median %.4f, worst %.4f (%s)\n", gi.name, pts.front().tflops,
                pts.front().shape.c_str(), pts[pts.size() / 2].tflops, pts.back().tflops, pts.back().shape.c_str());
  }
}

}  // namespace eng::bench
