// The cpu attention's causal blocks (kernels/cpu/attention.cpp runs its
// products on blocks of 32 query or key rows, each only over the keys or
// queries the mask lets it see) against attention written as loops in
// double, forward and backward, at lengths that span several blocks with a
// ragged last one: self-attention, a context-parallel query slice (q_offset,
// some keys after every query) and no mask with Tq != Tk. Outputs start as
// NaN, so an entry the kernel forgets to write fails.
// Tolerance: f32 sums of up to 100 O(1) terms: 2e-5 absolute and relative.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/rng.h"
#include "tests/test_util.h"

using namespace eng;

namespace {

struct Grads {
  std::vector<double> out, att, dq, dk, dv;
};

// Loops in double over (b, h): S, P, O, then dV, dP, dS, dQ, dK (the formulas
// in attention.cpp's header, written out element by element).
Grads reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                const std::vector<float>& dout, const cpu::AttentionDims& d, bool causal) {
  const int64_t B = d.B, Tq = d.Tq, Tk = d.Tk, NH = d.NH, HS = d.HS;
  const double sc = 1.0 / std::sqrt(double(HS));
  Grads g{std::vector<double>(q.size()), std::vector<double>(size_t(B * NH * Tq * Tk)), std::vector<double>(q.size()),
          std::vector<double>(k.size()), std::vector<double>(v.size())};
  auto qi = [&](int64_t b, int64_t t, int64_t h) { return size_t(((b * Tq + t) * NH + h) * HS); };
  auto ki = [&](int64_t b, int64_t t, int64_t h) { return size_t(((b * Tk + t) * NH + h) * HS); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h) {
      std::vector<double> P(size_t(Tq * Tk)), dS(size_t(Tq * Tk));
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t last = causal ? d.q_offset + i : Tk - 1;
        double m = -1e300, z = 0;
        for (int64_t j = 0; j <= last; ++j) {
          double s = 0;
          for (int64_t e = 0; e < HS; ++e) s += double(q[qi(b, i, h) + e]) * k[ki(b, j, h) + e];
          P[size_t(i * Tk + j)] = s * sc;
          m = std::max(m, s * sc);
        }
        for (int64_t j = 0; j <= last; ++j) z += std::exp(P[size_t(i * Tk + j)] - m);
        for (int64_t j = 0; j <= last; ++j) P[size_t(i * Tk + j)] = std::exp(P[size_t(i * Tk + j)] - m) / z;
        double dot = 0;  // sum_j P dP
        for (int64_t j = 0; j <= last; ++j) {
          double dp = 0;
          for (int64_t e = 0; e < HS; ++e) dp += double(dout[qi(b, i, h) + e]) * v[ki(b, j, h) + e];
          dS[size_t(i * Tk + j)] = dp;
          dot += P[size_t(i * Tk + j)] * dp;
        }
        for (int64_t j = 0; j <= last; ++j)
          dS[size_t(i * Tk + j)] = P[size_t(i * Tk + j)] * (dS[size_t(i * Tk + j)] - dot);
        for (int64_t j = 0; j < Tk; ++j) {
          const double p = P[size_t(i * Tk + j)], ds = dS[size_t(i * Tk + j)];
          g.att[size_t(((b * NH + h) * Tq + i) * Tk + j)] = p;
          for (int64_t e = 0; e < HS; ++e) {
            g.out[qi(b, i, h) + e] += p * v[ki(b, j, h) + e];
            g.dv[ki(b, j, h) + e] += p * dout[qi(b, i, h) + e];
            g.dq[qi(b, i, h) + e] += ds * k[ki(b, j, h) + e] * sc;
            g.dk[ki(b, j, h) + e] += ds * q[qi(b, i, h) + e] * sc;
          }
        }
      }
    }
  return g;
}

std::vector<float> randv(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = rng::normal(seed, i);
  return x;
}

std::vector<double> d64(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

}  // namespace

TEST_CASE("cpu attention's causal blocks match loops in double, forward and backward", "[kernels]") {
  struct Case {
    const char* name;
    cpu::AttentionDims d;
    cpu::AttentionMask mask;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : {Case{"self-attention, T 75", {2, 75, 75, 2, 8, 0}, cpu::AttentionMask::causal},
                        Case{"query slice at 37 of 100 keys", {1, 40, 100, 3, 4, 37}, cpu::AttentionMask::causal},
                        Case{"no mask, 40 queries x 70 keys", {1, 40, 70, 2, 4, 0}, cpu::AttentionMask::none},
                        // head sizes other than 4 and 8 through the transposed copies of K and V
                        Case{"head size 12, T 21", {2, 21, 21, 3, 12, 0}, cpu::AttentionMask::causal},
                        Case{"head size 16, no mask, 43 x 43", {1, 43, 43, 2, 16, 0}, cpu::AttentionMask::none}}) {
    INFO(c.name);
    const cpu::AttentionDims& d = c.d;
    const size_t nq = size_t(d.B * d.Tq * d.NH * d.HS), nk = size_t(d.B * d.Tk * d.NH * d.HS);
    const std::vector<float> q = randv(nq, 1), k = randv(nk, 2), v = randv(nk, 3), dout = randv(nq, 4);
    std::vector<float> out(nq, nan), att(size_t(d.B * d.NH * d.Tq * d.Tk), nan), dq(nq, nan), dk(nk, nan), dv(nk, nan);
    cpu::attention_forward(q.data(), k.data(), v.data(), out.data(), att.data(), d, c.mask);
    cpu::attention_backward(dout.data(), q.data(), k.data(), v.data(), att.data(), dq.data(), dk.data(), dv.data(), d,
                            c.mask);
    const Grads ref = reference(q, k, v, dout, d, c.mask == cpu::AttentionMask::causal);
    CHECK_CLOSE(d64(out), ref.out, 2e-5, 2e-5);
    // att: each row up to the end of the 32-key block holding its last key
    // (what the products read; attention.cpp's zeros_end). The rest stays
    // NaN, unwritten, and the backward's gradients above show nothing read it.
    std::vector<double> att_read(att.size()), ref_read(att.size());
    for (int64_t row = 0; row < d.B * d.NH * d.Tq; ++row) {
      const int64_t i = row % d.Tq;
      const int64_t last = c.mask == cpu::AttentionMask::causal ? std::min(d.q_offset + i, d.Tk - 1) : d.Tk - 1;
      const int64_t kend = c.mask == cpu::AttentionMask::causal
                               ? std::min(d.q_offset + std::min(i / 32 * 32 + 31, d.Tq - 1), d.Tk - 1) + 1
                               : d.Tk;
      const int64_t end =
          c.mask == cpu::AttentionMask::causal ? std::min(d.Tk, std::max(kend, (last / 32 + 1) * 32)) : d.Tk;
      for (int64_t j = 0; j < end; ++j) {
        att_read[size_t(row * d.Tk + j)] = att[size_t(row * d.Tk + j)];
        ref_read[size_t(row * d.Tk + j)] = ref.att[size_t(row * d.Tk + j)];
      }
    }
    CHECK_CLOSE(att_read, ref_read, 2e-5, 2e-5);
    CHECK_CLOSE(d64(dq), ref.dq, 2e-5, 2e-5);
    CHECK_CLOSE(d64(dk), ref.dk, 2e-5, 2e-5);
    CHECK_CLOSE(d64(dv), ref.dv, 2e-5, 2e-5);
    if (d.q_offset > 0) {  // the slice's last query (37 + 39 = 76) sees keys 0..76: keys 77..99 get exactly 0
      const size_t first_unseen = size_t(77 * d.NH * d.HS);
      CHECK(std::all_of(dk.begin() + first_unseen, dk.end(), [](float x) { return x == 0.f; }));
      CHECK(std::all_of(dv.begin() + first_unseen, dv.end(), [](float x) { return x == 0.f; }));
    }
  }
}
