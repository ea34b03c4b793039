// Forward results of the CPU kernels (kernels/cpu, kernels/gemm) in f32
// against naive formulas written here in double: triple-loop GEMM, explicit
// mean/variance, softmax by hand, attention as three loops, log-sum-exp, index
// arithmetic for permute. The CPU kernels are the reference the CUDA kernels
// will be checked against, so they need their own independent check.
// Tolerances: every reference is exact in double; the f32 kernel differs by
// rounding of O(10)-term sums of O(1) values, so atol = rtol = 1e-5 unless a
// case says otherwise.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/gemm/gemm.h"
#include "kernels/rng.h"
#include "tests/test_util.h"

using namespace eng;

namespace {

constexpr double kTol = 1e-5;

std::vector<float> randv(size_t n, uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * rng::normal(seed, i);
  return v;
}

std::vector<double> d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

TEST_CASE("cpu gemm: all transpose combos, alpha/beta, padded leading dims and strided batches", "[kernels]") {
  const int64_t M = 3, N = 5, K = 4, pad = 2;  // pad: row strides longer than the rows
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T}) {
      INFO("ta " << int(ta) << " tb " << int(tb));
      const int64_t arows = ta == Trans::N ? M : K, acols = ta == Trans::N ? K : M;
      const int64_t brows = tb == Trans::N ? K : N, bcols = tb == Trans::N ? N : K;
      const int64_t lda = acols + pad, ldb = bcols + pad, ldc = N + pad;
      std::vector<float> A = randv(size_t(arows * lda), 1), B = randv(size_t(brows * ldb), 2);
      std::vector<float> C = randv(size_t(M * ldc), 3);
      auto a = [&](int64_t i, int64_t k) {
        return double(ta == Trans::N ? A[size_t(i * lda + k)] : A[size_t(k * lda + i)]);
      };
      auto b = [&](int64_t k, int64_t j) {
        return double(tb == Trans::N ? B[size_t(k * ldb + j)] : B[size_t(j * ldb + k)]);
      };
      std::vector<double> ref = d(C);  // padding columns must stay untouched
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += a(i, k) * b(k, j);
          ref[size_t(i * ldc + j)] = 0.5 * s + 2.0 * ref[size_t(i * ldc + j)];
        }
      cpu::gemm<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.0f, C.data(), ldc);
      CHECK_CLOSE(d(C), ref, kTol, kTol);
    }
  // Three batches sharing one B (stride 0), as matmul does for a 2-D weight.
  const int64_t batch = 3;
  std::vector<float> A = randv(size_t(batch * M * K), 4), B = randv(size_t(K * N), 5), C(size_t(batch * M * N));
  cpu::gemm_batched<float>(Trans::N, Trans::N, M, N, K, 1.f, A.data(), K, M * K, B.data(), N, 0, 0.f, C.data(), N,
                           M * N, batch);
  std::vector<double> ref(C.size());
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k)
          ref[size_t((p * M + i) * N + j)] += double(A[size_t((p * M + i) * K + k)]) * B[size_t(k * N + j)];
  CHECK_CLOSE(d(C), ref, kTol, kTol);
}

TEST_CASE("cpu layernorm_forward matches explicit mean and biased variance", "[kernels]") {
  const int64_t N = 3, C = 7;
  const double eps = 1e-5;
  // Row 1 gets a large offset: a one-pass E[x^2] - E[x]^2 variance would lose it.
  std::vector<float> x = randv(size_t(N * C), 10), w = randv(size_t(C), 11), b = randv(size_t(C), 12);
  for (int64_t c = 0; c < C; ++c) x[size_t(C + c)] += 1000.f;
  std::vector<float> out(x.size()), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  cpu::layernorm_forward(x.data(), w.data(), b.data(), out.data(), mean.data(), rstd.data(), N, C, eps);
  std::vector<double> ref_out(x.size()), ref_mean(static_cast<size_t>(N)), ref_rstd(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += x[size_t(r * C + c)];
    m /= double(C);
    for (int64_t c = 0; c < C; ++c) v += (x[size_t(r * C + c)] - m) * (x[size_t(r * C + c)] - m);
    v /= double(C);  // biased, as torch.nn.LayerNorm
    ref_mean[size_t(r)] = m;
    ref_rstd[size_t(r)] = 1.0 / std::sqrt(v + eps);
    for (int64_t c = 0; c < C; ++c)
      ref_out[size_t(r * C + c)] = (x[size_t(r * C + c)] - m) * ref_rstd[size_t(r)] * w[size_t(c)] + b[size_t(c)];
  }
  // Row 1's mean (~1000) carries f32 rounding of ~1e-4 absolute, which the
  // normalised output then amplifies by rstd (~1): hence atol 1e-3 there.
  CHECK_CLOSE(d(mean), ref_mean, kTol, kTol);
  CHECK_CLOSE(d(rstd), ref_rstd, kTol, 1e-4);
  CHECK_CLOSE(d(out), ref_out, 1e-3, kTol);
}

TEST_CASE("cpu softmax_forward: rows sum to 1, match exp/sum, causal entries are exactly 0", "[kernels]") {
  const int64_t T = 5, rows = 2 * T;  // two (T, T) blocks
  std::vector<float> x = randv(size_t(rows * T), 20, 3.f);
  x[0] = 1000.f;  // must not overflow: the max is subtracted first
  std::vector<float> y(x.size());
  cpu::softmax_forward(x.data(), y.data(), rows, T, false);
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (int64_t j = 0; j < T; ++j) m = std::max(m, double(x[size_t(r * T + j)]));
    for (int64_t j = 0; j < T; ++j) s += std::exp(x[size_t(r * T + j)] - m);
    for (int64_t j = 0; j < T; ++j) ref[size_t(r * T + j)] = std::exp(x[size_t(r * T + j)] - m) / s;
  }
  CHECK_CLOSE(d(y), ref, 1e-6, kTol);

  cpu::softmax_forward(x.data(), y.data(), rows, T, true);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r % T;  // query index within its block
    double m = -1e300, s = 0, total = 0;
    for (int64_t j = 0; j <= i; ++j) m = std::max(m, double(x[size_t(r * T + j)]));
    for (int64_t j = 0; j <= i; ++j) s += std::exp(x[size_t(r * T + j)] - m);
    for (int64_t j = 0; j < T; ++j) {
      const float yj = y[size_t(r * T + j)];
      total += yj;
      if (j > i) {
        INFO("row " << r << " key " << j);
        CHECK(yj == 0.f);
      } else {
        CHECK(std::fabs(yj - std::exp(x[size_t(r * T + j)] - m) / s) <= 1e-6);
      }
    }
    CHECK(std::fabs(total - 1.0) <= 1e-6);
  }
  CHECK(y[0] == 1.f);  // query 0 sees only itself
}

TEST_CASE("cpu attention_forward matches softmax(QK^T/sqrt(HS)) V by loops, causal and not", "[kernels]") {
  const int64_t B = 2, T = 5, NH = 2, HS = 3, C = NH * HS;
  const size_t n = size_t(B * T * C);
  for (const cpu::AttentionMask mask : {cpu::AttentionMask::causal, cpu::AttentionMask::none}) {
    const bool causal = mask == cpu::AttentionMask::causal;
    INFO((causal ? "causal" : "no mask"));
    std::vector<float> q = randv(n, 30), k = randv(n, 31), v = randv(n, 32), out(n), att(size_t(B * NH * T * T));
    cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), att.data(), cpu::AttentionDims{B, T, T, NH, HS, 0},
                           mask);
    auto at = [&](const std::vector<float>& t, int64_t b, int64_t tt, int64_t h, int64_t e) {
      return double(t[size_t(((b * T + tt) * NH + h) * HS + e)]);
    };
    std::vector<double> ref_out(n), ref_att(att.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t last = causal ? i : T - 1;  // the last key query i sees
          std::vector<double> s(size_t(T), -std::numeric_limits<double>::infinity());
          double m = -1e300, z = 0;
          for (int64_t j = 0; j <= last; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < HS; ++e) dot += at(q, b, i, h, e) * at(k, b, j, h, e);
            s[size_t(j)] = dot / std::sqrt(double(HS));
            m = std::max(m, s[size_t(j)]);
          }
          for (int64_t j = 0; j <= last; ++j) z += std::exp(s[size_t(j)] - m);
          for (int64_t j = 0; j < T; ++j) {
            const double p = j <= last ? std::exp(s[size_t(j)] - m) / z : 0.0;
            ref_att[size_t(((b * NH + h) * T + i) * T + j)] = p;
            for (int64_t e = 0; e < HS; ++e) ref_out[size_t(((b * T + i) * NH + h) * HS + e)] += p * at(v, b, j, h, e);
          }
        }
    CHECK_CLOSE(d(att), ref_att, 1e-6, kTol);
    CHECK_CLOSE(d(out), ref_out, kTol, kTol);
    if (!causal) CHECK(att[1] > 0.f);  // query 0 sees key 1
  }
}

TEST_CASE("cpu cross_entropy_forward matches log-sum-exp by hand; ignored rows give 0", "[kernels]") {
  const int64_t N = 4, V = 7;
  std::vector<float> logits = randv(size_t(N * V), 40, 2.f), loss(static_cast<size_t>(N)), lse(static_cast<size_t>(N));
  logits[size_t(2 * V)] = 80.f;  // exp(80) overflows f32 without the max shift
  const std::vector<int32_t> targets{3, -100, 0, 6};
  cpu::cross_entropy_forward(logits.data(), targets.data(), loss.data(), lse.data(), N, V, -100);
  std::vector<double> ref(static_cast<size_t>(N));
  for (int64_t r = 0; r < N; ++r) {
    double m = -1e300, s = 0;
    for (int64_t j = 0; j < V; ++j) m = std::max(m, double(logits[size_t(r * V + j)]));
    for (int64_t j = 0; j < V; ++j) s += std::exp(logits[size_t(r * V + j)] - m);
    const double l = m + std::log(s);
    CHECK(std::fabs(lse[size_t(r)] - l) <= kTol * (1 + std::fabs(l)));
    ref[size_t(r)] = targets[size_t(r)] == -100 ? 0.0 : l - logits[size_t(r * V + targets[size_t(r)])];
  }
  CHECK_CLOSE(d(loss), ref, kTol, kTol);
  CHECK(loss[1] == 0.f);
}

TEST_CASE("cpu permute matches index arithmetic", "[kernels]") {
  const int64_t shape[4] = {2, 3, 4, 5};
  const int dims[4] = {3, 1, 0, 2};
  std::vector<float> x(120), out(120);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);  // each value is its own source index
  cpu::permute(x.data(), out.data(), shape, dims, 4);
  // out has shape (5, 3, 2, 4) and out[a, b, c, e] = x[c, b, e, a].
  size_t o = 0;
  bool ok = true;
  for (int64_t a = 0; a < 5; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t e = 0; e < 4; ++e) ok = ok && out[o++] == float(((c * 3 + b) * 4 + e) * 5 + a);
  CHECK(ok);
}

TEST_CASE("cpu gelu/relu, embedding, reductions, bias and mse against direct formulas", "[kernels]") {
  std::vector<float> x = randv(50, 50, 3.f), y(50);
  cpu::gelu_forward(x.data(), y.data(), 50);
  std::vector<double> tanh_ref(50), erf_ref(50);
  for (size_t i = 0; i < 50; ++i) {
    const double xi = x[i];
    tanh_ref[i] = 0.5 * xi * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (xi + 0.044715 * xi * xi * xi)));
    erf_ref[i] = 0.5 * xi * (1 + std::erf(xi / std::sqrt(2.0)));
  }
  CHECK_CLOSE(d(y), tanh_ref, kTol, kTol);
  CHECK_CLOSE(d(y), erf_ref, 1e-3, 0.0);  // the tanh form stays within ~2e-4 of exact GELU
  cpu::relu_forward(x.data(), y.data(), 50);
  for (size_t i = 0; i < 50; ++i) CHECK(y[i] == std::max(x[i], 0.f));

  // Embedding gathers rows; its backward sums rows of repeated ids.
  const int64_t V = 4, C = 3;
  const std::vector<float> w = randv(size_t(V * C), 51);
  const std::vector<int32_t> ids{2, 0, 2, 2};
  std::vector<float> e(ids.size() * C), dw(size_t(V * C), 123.f);
  cpu::embedding_forward(w.data(), ids.data(), e.data(), int64_t(ids.size()), C, 0, V);
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < C; ++c) CHECK(e[i * C + size_t(c)] == w[size_t(ids[i] * C + c)]);
  cpu::embedding_backward(e.data(), ids.data(), dw.data(), int64_t(ids.size()), V, C, 0);
  std::vector<double> dw_ref(size_t(V * C));
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t c = 0; c < C; ++c) dw_ref[size_t(ids[i] * C + c)] += e[i * C + size_t(c)];
  CHECK_CLOSE(d(dw), dw_ref, kTol, kTol);  // also: the stale 123s are overwritten

  // sum over the middle dim of (2, 3, 4), and the column sums of a bias gradient.
  std::vector<float> t = randv(24, 52), s(8), db(4);
  cpu::sum_dim(t.data(), s.data(), 2, 3, 4);
  std::vector<double> s_ref(8), db_ref(4);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t i = 0; i < 4; ++i) s_ref[size_t(o * 4 + i)] += t[size_t((o * 3 + j) * 4 + i)];
  CHECK_CLOSE(d(s), s_ref, kTol, kTol);
  cpu::bias_backward(t.data(), db.data(), 6, 4);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 4; ++c) db_ref[size_t(c)] += t[size_t(r * 4 + c)];
  CHECK_CLOSE(d(db), db_ref, kTol, kTol);

  double mse_ref = 0;
  for (size_t i = 0; i < 24; ++i) mse_ref += (double(t[i]) - x[i]) * (double(t[i]) - x[i]) / 24;
  CHECK(std::fabs(cpu::mse_forward(t.data(), x.data(), 24) - mse_ref) <= kTol * mse_ref);
}

TEST_CASE("cpu dropout: kept elements scaled by 1/(1-p), rate close to p, mask indexed by offset", "[kernels]") {
  const int64_t n = 20000;
  const double p = 0.3;
  std::vector<float> x = randv(size_t(n), 60), y(static_cast<size_t>(n));
  cpu::dropout_forward(x.data(), y.data(), n, p, 7, 0);
  int64_t dropped = 0;
  bool scaled_ok = true;
  for (int64_t i = 0; i < n; ++i) {
    if (y[size_t(i)] == 0.f)
      ++dropped;
    else
      scaled_ok = scaled_ok && std::fabs(y[size_t(i)] - x[size_t(i)] / (1 - p)) <= 1e-6 * (1 + std::fabs(y[size_t(i)]));
  }
  CHECK(scaled_ok);
  // Binomial(20000, 0.3) has sd ~65 (0.0032 as a rate): 0.02 is > 6 sd.
  CHECK(std::fabs(double(dropped) / double(n) - p) < 0.02);
  // Element i uses counter offset + i: running on x[100:] with offset 100
  // reproduces the tail, which is how a sharded tensor keeps one mask.
  std::vector<float> tail(size_t(n - 100));
  cpu::dropout_forward(x.data() + 100, tail.data(), n - 100, p, 7, 100);
  CHECK(std::equal(tail.begin(), tail.end(), y.begin() + 100));
}
