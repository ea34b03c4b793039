// GEMM cases and the shape sweep (like stas00's mamf-finder: the Maximum
// Achievable Matmul FLOP/s over a range of shapes, not one lucky size), in
// f32, bf16 and f16 storage: ours (the hand-written tiled GEMM) everywhere it
// runs, and on a GPU cuBLASLt next to it in every compute mode that fits the
// storage (f32: fp32 and tf32; bf16: bf16; f16: fp16), so each storage type
// has "ours vs cuBLASLt" in the same run.
// Formula, kernels/cuda/gemm.cu (tiled_gemm_kernel), per batch, with tile reuse:
//   bytes = sizeof(T) * (M K ceil(N/64) + K N ceil(M/64) + M N (beta != 0 ? 2 : 1))
//   flops = 2 M N K
// cuBLASLt's tiling is not ours to know, so its rows use the no-reuse lower
// bound of kernels/gemm/gemm.h, sizeof(T) (M K + K N + M N) with beta = 0.
// linear_gelu (fused / unfused): the MLP's c_fc + GELU with and without the
// GEMM's GELU epilogue (docs/kernels/gemm.md, "GELU: an epilogue ...").
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include "base/error.h"
#include "bench/cases.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_mma.h"
#include "kernels/cuda/ladder.h"
#include "kernels/gemm/cublaslt.h"
#include "kernels/gemm/gemm.h"
#if defined(ENGINE_HAVE_CUDA)
#include "engine/gpu_context.h"
#endif

namespace eng::bench {

static double ceil_div(int64_t a, int64_t b) { return double((a + b - 1) / b); }

static double gemm_bytes(const GemmCall& g, DType st) {
  return double(dtype_size(st)) * (double(g.M * g.K) * ceil_div(g.N, 64) + double(g.K * g.N) * ceil_div(g.M, 64) +
                                   double(g.M * g.N) * (g.beta != 0.f ? 2 : 1));
}
static double lt_bytes(const GemmCall& g, DType st) {
  return double(dtype_size(st)) * double(g.M * g.K + g.K * g.N + g.M * g.N);
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

// The cuBLASLt compute modes, the storage each runs on, and the peak it is
// measured against (kernels/gemm/cublaslt.h defines the modes).
struct LtMode {
  ComputeMode mode;
  const char* name;  // the dtype column of its rows
  DType storage;
  Bound bound;
};
static constexpr LtMode kLtModes[] = {{ComputeMode::fp32, "fp32", DType::f32, Bound::compute},
                                      {ComputeMode::tf32, "tf32", DType::f32, Bound::compute_tf32},
                                      {ComputeMode::bf16, "bf16", DType::bf16, Bound::compute_bf16_fp16},
                                      {ComputeMode::fp16, "fp16", DType::f16, Bound::compute_bf16_fp16}};
static constexpr DType kStorages[] = {DType::f32, DType::bf16, DType::f16};

// Validation, |x - ref| <= atol + rtol |ref|, against OpenBLAS in fp32 on the
// inputs rounded to the storage type (so only the GEMM's own rounding shows).
// Inputs are N(0, 0.5^2): an output sums K products of size ~0.25, so it is
// typically ~0.25 sqrt(K) (`typ`), and near-zero outputs (cancellation) need
// an absolute tolerance in units of typ.
//  - fp32 math on f32 (ours, cuBLASLt fp32): the same products summed in
//    another order, ~sqrt(K) ulps: 1e-4 absolute and relative.
//  - tf32: the tensor cores keep 10 of each input's 23 mantissa bits (error up
//    to 2^-10 relative, if truncated); K such errors of random sign add up to
//    ~2^-10 typ (one sigma). 8e-3 typ is ~8 sigma: millions of outputs pass,
//    a wrong layout (errors ~typ) fails.
//  - bf16 / f16 storage: one rounding of the output (half an ulp, 2^-9 /
//    2^-12 relative), tests/kernels/emu_check.h's 8e-3 / 1e-3; the same
//    fraction of typ as the absolute part, which also covers a split-K that
//    rounds its partial sums to the storage type.
struct Tol {
  double atol, rtol;
};
static Tol gemm_tol(ComputeMode mode, int64_t K) {
  const double typ = 0.25 * std::sqrt(double(K));
  switch (mode) {
    case ComputeMode::fp32:
      return {1e-4, 1e-4};
    case ComputeMode::tf32:
    case ComputeMode::bf16:
      return {8e-3 * typ, 8e-3};
    case ComputeMode::fp16:
      return {1e-3 * typ, 1e-3};
  }
  return {0, 0};
}
// Our kernel's accumulation and rounding match cuBLASLt's mode for the same storage.
static ComputeMode ours_mode(DType st) {
  return st == DType::bf16 ? ComputeMode::bf16 : st == DType::f16 ? ComputeMode::fp16 : ComputeMode::fp32;
}

// A and B (seeded N(0, 0.5^2), rounded to st) and an empty C for call g on
// dev: in st on a GPU, in f32 on the cpu (the reference's input).
struct Operands {
  Tensor a, b, c;
};
static Operands operands(const GemmCall& g, DType st, Device dev, uint64_t seed) {
  auto input = [&](int64_t rows, int64_t cols, uint64_t s) {
    const Tensor x = Tensor::randn({rows, cols}, s, 0.5f).to(st);
    return dev.type == DeviceType::cpu ? x.to(DType::f32) : x.to(dev);
  };
  Operands o;
  o.a = g.ta == Trans::N ? input(g.M, g.K, seed) : input(g.K, g.M, seed);
  o.b = g.tb == Trans::N ? input(g.K, g.N, seed + 1) : input(g.N, g.K, seed + 1);
  o.c = Tensor::empty({g.M, g.N}, dev.type == DeviceType::cpu ? DType::f32 : st, dev);
  return o;
}

// Our GEMM on any device: OpenBLAS on cpu, the hand-written tiled kernel on
// emu/cuda in the tensors' storage type.
static void run_gemm(Device dev, const GemmCall& g, const Operands& o) {
  if (dev.type == DeviceType::cpu)
    cpu::gemm_call<float>(g, o.a.data<float>(), o.b.data<float>(), o.c.data<float>());
  else
    ENGINE_GPU_CALL(dev, tiled_gemm, gpu::storage_of(o.c.dtype()), g, o.a.data_ptr(), o.b.data_ptr(), o.c.data_ptr(),
                    nullptr, Epilogue::none, nullptr, nullptr);
}

#if defined(ENGINE_HAVE_CUDA)
// cuBLASLt through the engine's per-device context (engine/gpu_context.h), as
// matmul() reaches it; the first call of a shape runs the heuristic, which
// the validation run or the warm-up absorbs.
static void run_cublaslt(Device dev, ComputeMode mode, const GemmCall& g, const Operands& o) {
  gemm(gpu_context(dev.index).cublaslt(), g, gpu::storage_of(o.c.dtype()), o.a.data_ptr(), o.b.data_ptr(),
       o.c.data_ptr(), nullptr, Epilogue::none, nullptr, mode, nullptr);
}
#endif

static ImplRow cublaslt_row(const GemmCall& g, const LtMode& m) {
  ImplRow row;
  row.impl = Impl::cublaslt;
  row.dtype = m.name;
  row.bytes = lt_bytes(g, m.storage);
  row.bound = m.bound;
  const Tol tol = gemm_tol(m.mode, g.K);
  row.atol = tol.atol;
  row.rtol = tol.rtol;
#if defined(ENGINE_HAVE_CUDA)
  row.bind = [g, m](Device dev) {
    const Operands o = operands(g, m.storage, dev, 11);
    return Runner{[=] { run_cublaslt(dev, m.mode, g, o); }, [=] { return host(o.c); }};
  };
#endif
  return row;
}

// docs/kernels/gemm.md's steps 0 and 1 (kernels/cuda/ladder_gemm.cu), f32:
//   naive: bytes requested = 4 (2 M N K + M N), each FMA loading two floats;
//   smem:  bytes = 4 (M K ceil(N/16) + K N ceil(M/16) + M N), 16 x 16 tiles;
// flops 2 M N K both. (Step 2 is ours, tiled_gemm: gemm_bytes above.)
static std::vector<Rung> gemm_ladder(const GemmCall& g) {
  const double M = double(g.M), N = double(g.N), K = double(g.K), flops = 2.0 * M * N * K;
  const double tiles_n = ceil_div(g.N, 16), tiles_m = ceil_div(g.M, 16);
  auto bind = [g](bool smem) {
    return [g, smem](Device dev) {
      const Operands o = operands(g, DType::f32, dev, 11);
      return Runner{[=] {
                      if (smem)
                        ENGINE_GPU_CALL(dev, ladder_gemm_smem, g, o.a.data<float>(), o.b.data<float>(),
                                        o.c.data<float>(), nullptr);
                      else
                        ENGINE_GPU_CALL(dev, ladder_gemm_naive, g, o.a.data<float>(), o.b.data<float>(),
                                        o.c.data<float>(), nullptr);
                    },
                    [=] { return host(o.c); }};
    };
  };
  return {{"naive", 4.0 * (2.0 * M * N * K + M * N), flops, bind(false)},
          {"smem", 4.0 * (M * K * tiles_n + K * N * tiles_m + M * N), flops, bind(true)}};
}

// The tensor-core rung (kernels/cuda/gemm_mma.cu), bf16 and f16: 64 x 64
// tiles, bytes = 2 (M K ceil(N/64) + K N ceil(M/64) + M N), flops 2 M N K.
// Only where cp.async can copy the operands' rows (lda, ldb multiples of 8).
static std::vector<Rung> gemm_mma_ladder(const GemmCall& g, DType st) {
  if (g.lda % 8 || g.ldb % 8) return {};
  const double M = double(g.M), N = double(g.N), K = double(g.K);
  const double bytes = 2.0 * (M * K * ceil_div(g.N, 64) + K * N * ceil_div(g.M, 64) + M * N);
  auto bind = [g, st](Device dev) {
    const Operands o = operands(g, st, dev, 11);
    return Runner{[=] {
                    ENGINE_GPU_CALL(dev, gemm_mma, gpu::storage_of(st), g, o.a.data_ptr(), o.b.data_ptr(),
                                    o.c.data_ptr(), nullptr, Epilogue::none, nullptr, nullptr);
                  },
                  [=] { return host(o.c); }};
  };
  return {mma_rung(bytes, 2.0 * M * N * K, bind)};
}

static Case gemm_case(const std::string& name, const std::string& what, Trans ta, Trans tb, int64_t M, int64_t N,
                      int64_t K, DType st) {
  const GemmCall g = make_call(ta, tb, M, N, K);
  Case c;
  c.name = name;
  std::ostringstream s;
  s << what << " " << M << "x" << N << "x" << K << (ta == Trans::T ? " TA" : "") << (tb == Trans::T ? " TB" : "");
  c.shape = s.str();
  c.dtype = dtype_name(st);
  c.bytes = gemm_bytes(g, st);
  c.flops = 2.0 * double(M) * double(N) * double(K);
  c.bound = Bound::compute;
  const Tol tol = gemm_tol(ours_mode(st), K);
  c.atol = tol.atol;
  c.rtol = tol.rtol;
  c.bind = [g, st](Device dev) {
    const Operands o = operands(g, st, dev, 11);
    return Runner{[=] { run_gemm(dev, g, o); }, [=] { return host(o.c); }};
  };
  for (const LtMode& m : kLtModes)
    if (m.storage == st) c.vendor.push_back(cublaslt_row(g, m));
  c.ladder = st == DType::f32 ? gemm_ladder(g) : gemm_mma_ladder(g, st);
  return c;
}

// linear_gelu fused vs unfused: gelu(x W^T + b), x (R, C), W (H, C), as
// linear_gelu's forward runs it. Fused: the GELU epilogue stores gelu(p) and
// the pre-activation p (gelu_aux_bias); unfused: the bias epilogue stores p,
// then activation.cu's GELU reads p and writes gelu(p). On the cpu both are
// OpenBLAS + bias + the cpu GELU (no fusion there). Bytes (docs/kernels/
// gemm.md): the GEMM's gemm_bytes + H (bias) + 2 R H (fused: out and aux) or
// + R H + 2 R H (unfused: p, then GELU's read and write); flops 2 R H C + 20 R H.
static Case linear_gelu_case(bool fused, int64_t R, int64_t H, int64_t C) {
  const GemmCall g = make_call(Trans::N, Trans::T, R, H, C);
  Case c;
  c.name = "linear_gelu";
  c.shape = std::string(fused ? "fused " : "unfused ") + std::to_string(R) + "x" + std::to_string(H) + "x" +
            std::to_string(C);
  const double RH = double(R) * double(H);
  c.bytes =
      gemm_bytes(g, DType::f32) + 4.0 * (double(H) + (fused ? 1.0 : 2.0) * RH);  // gemm_bytes counts one R H store
  c.flops = 2.0 * RH * double(C) + 20.0 * RH;
  c.bound = Bound::compute;
  c.atol = 1e-4;
  c.rtol = 1e-4;
  c.bind = [g, fused](Device dev) {
    const Tensor x = randn({g.M, g.K}, 31, dev, 0.5f), w = randn({g.N, g.K}, 32, dev, 0.5f);
    const Tensor b = randn({g.N}, 33, dev, 0.5f);
    const Tensor pre = Tensor::empty({g.M, g.N}, DType::f32, dev), out = Tensor::empty({g.M, g.N}, DType::f32, dev);
    auto run = [=] {
      if (dev.type == DeviceType::cpu) {
        cpu::gemm_call<float>(g, x.data<float>(), w.data<float>(), pre.data<float>());
        cpu::bias_add<float>(pre.data<float>(), b.data<float>(), g.M, g.N);
        cpu::gelu_forward<float>(pre.data<float>(), out.data<float>(), g.M * g.N);
      } else if (fused) {
        ENGINE_GPU_CALL(dev, tiled_gemm, gpu::Storage::f32, g, x.data_ptr(), w.data_ptr(), out.data_ptr(), b.data_ptr(),
                        Epilogue::gelu_aux_bias, pre.data_ptr(), nullptr);
      } else {
        ENGINE_GPU_CALL(dev, tiled_gemm, gpu::Storage::f32, g, x.data_ptr(), w.data_ptr(), pre.data_ptr(), b.data_ptr(),
                        Epilogue::bias, nullptr, nullptr);
        ENGINE_GPU_CALL(dev, gelu_forward, gpu::Storage::f32, pre.data_ptr(), out.data_ptr(), g.M * g.N, nullptr);
      }
    };
    return Runner{run, [=] { return host(out); }};
  };
  return c;
}

// GPT-2 124M's linear layers at B*T = 4096 tokens (C = 768): x @ W^T as
// linear() calls it (TB), and the weight gradient dW = dY^T @ X (TA); each in
// f32, bf16 and f16 storage; and its MLP's c_fc + GELU, fused and unfused (f32).
std::vector<Case> matmul_cases(bool quick) {
  std::vector<Case> cases;
  const int64_t BT = 4096, C = 768;
  for (DType st : kStorages) {
    if (quick) {
      cases.push_back(gemm_case("matmul_fwd", "x@W^T", Trans::N, Trans::T, 67, 96, 80, st));
      cases.push_back(gemm_case("matmul_bwd_w", "dY^T@X", Trans::T, Trans::N, 96, 80, 67, st));
      continue;
    }
    cases.push_back(gemm_case("matmul_fwd", "qkv", Trans::N, Trans::T, BT, 3 * C, C, st));
    cases.push_back(gemm_case("matmul_fwd", "fc", Trans::N, Trans::T, BT, 4 * C, C, st));
    cases.push_back(gemm_case("matmul_fwd", "proj", Trans::N, Trans::T, BT, C, 4 * C, st));
    cases.push_back(gemm_case("matmul_bwd_w", "fc dW", Trans::T, Trans::N, 4 * C, C, BT, st));
  }
  for (bool fused : {true, false})
    cases.push_back(quick ? linear_gelu_case(fused, 67, 96, 80) : linear_gelu_case(fused, BT, 4 * C, C));
  return cases;
}

// --- the sweep ---------------------------------------------------------------

// A GEMM implementation the sweep times: ours (cpu, cuda) or cuBLASLt in one
// compute mode; dtype is the storage for ours, the mode for cuBLASLt.
struct GemmImpl {
  Impl impl;
  DType storage;
  std::string dtype;
  Bound bound;
  std::function<void(Device, const GemmCall&, const Operands&)> run;
};

// cpu (OpenBLAS, f32); on a GPU, per storage type, ours then cuBLASLt in
// every mode that fits it.
static std::vector<GemmImpl> sweep_impls() {
  std::vector<GemmImpl> impls{{Impl::cpu, DType::f32, "f32", Bound::compute, run_gemm}};
  if (!cuda_available()) return impls;
  for (DType st : kStorages) {
    impls.push_back({Impl::cuda, st, dtype_name(st), Bound::compute, run_gemm});
#if defined(ENGINE_HAVE_CUDA)
    for (const LtMode& m : kLtModes)
      if (m.storage == st)
        impls.push_back({Impl::cublaslt, st, m.name, m.bound,
                         [m](Device dev, const GemmCall& g, const Operands& o) { run_cublaslt(dev, m.mode, g, o); }});
#endif
  }
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

// Times every implementation on every shape; prints each one's best, median
// and worst, then per cuBLASLt mode its median over ours in the same storage.
void gemm_sweep(Workbench& wb) {
  const Options& o = wb.options();
  const Range dflt = o.quick ? Range{64, 128, 64} : Range{512, 2048, 512};
  const std::vector<int64_t> ms = values(parse_range(o.m_range, dflt)), ns = values(parse_range(o.n_range, dflt)),
                             ks = values(parse_range(o.k_range, dflt));
  std::printf("\n== GEMM sweep: C = A @ B, %zu shapes (M %lld..%lld, N %lld..%lld, K %lld..%lld)\n",
              ms.size() * ns.size() * ks.size(), (long long)ms.front(), (long long)ms.back(), (long long)ns.front(),
              (long long)ns.back(), (long long)ks.front(), (long long)ks.back());
  if (!cuda_available()) {
    std::printf("cuda: no GPU answers (the sweep times the cpu only)\n");
    wb.note_once(cublaslt_skip_note());
  }
  const std::vector<GemmImpl> impls = sweep_impls();
  std::vector<SweepSummary> sums;  // one per impls[i]
  for (const GemmImpl& gi : impls) {
    struct Point {
      double tflops;
      std::string shape;
    };
    std::vector<Point> pts;
    const Device dev = impl_device(gi.impl);
    const char* name = impl_name(gi.impl);
    for (int64_t M : ms)
      for (int64_t N : ns)
        for (int64_t K : ks) {
          const GemmCall g = make_call(Trans::N, Trans::N, M, N, K);
          const Operands ops = operands(g, gi.storage, dev, 21);
          Result r = make_result("gemm_sweep", name,
                                 std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K), gi.dtype);
          r.median_ms = median_ms([&] { gi.run(dev, g, ops); }, dev, o.warmup, o.repeats);
          const double bytes = gi.impl == Impl::cublaslt ? lt_bytes(g, gi.storage) : gemm_bytes(g, gi.storage);
          wb.report(r, bytes, 2.0 * double(M) * double(N) * double(K), gi.bound, gi.impl);
          pts.push_back({wb.results().back().tflops, r.shape});
        }
    std::sort(pts.begin(), pts.end(), [](const Point& x, const Point& y) { return x.tflops > y.tflops; });
    const SweepSummary sum{name,
                           gi.dtype,
                           pts.front().shape,
                           pts.back().shape,
                           pts.front().tflops,
                           pts[pts.size() / 2].tflops,
                           pts.back().tflops};
    std::printf("gemm_sweep %s %s: best %.4f TFLOP/s (%s), median %.4f, worst %.4f (%s)\n", name, gi.dtype.c_str(),
                sum.best, sum.best_shape.c_str(), sum.median, sum.worst, sum.worst_shape.c_str());
    wb.add_sweep(sum);
    sums.push_back(sum);
  }
  // The ratios, after every implementation has run, one line per cuBLASLt mode.
  for (size_t i = 0; i < impls.size(); ++i) {
    if (impls[i].impl != Impl::cublaslt) continue;
    for (size_t j = 0; j < impls.size(); ++j)
      if (impls[j].impl == Impl::cuda && impls[j].storage == impls[i].storage) {
        const double lt = sums[i].median, ours = sums[j].median;
        const SweepRatio r{impls[i].dtype, dtype_name(impls[i].storage), lt, ours, ours > 0 ? lt / ours : 0};
        std::printf("gemm_sweep ratio %s (%s storage): cuBLASLt / ours = %.2fx (median %.4f vs %.4f TFLOP/s)\n",
                    r.mode.c_str(), r.storage.c_str(), r.ratio, lt, ours);
        wb.add_ratio(r);
      }
  }
}

}  // namespace eng::bench
