// The tensor-core instructions (kernels/cuda/tensor_core.cuh) lane by lane,
// through the probes of kernels/cuda/tensor_core_probe.cu, against a scalar
// reference written from the PTX ISA's fragment tables in the forward
// direction (which lane and register holds which element), where the
// emulator inverts them (who holds A(row, k)): the two agree only if the
// layouts are right. On a GPU (gpu.kernel_suite) the same checks hold the
// emulator's layouts against the hardware.
// Tolerances: the emulator adds each dot product in double and rounds once,
// as the reference does, so on emu the results are bit for bit; a GPU's
// tensor core adds in its own order and internal precision (left open by the
// PTX ISA): within 2^-20 of the sum of |a b| and |c| there.
#include <cmath>
#include <cstring>

#include "kernels/cuda/tensor_core_probe.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {

uint16_t bits16(float v, bool bf16) { return bf16 ? float_to_bf16(v) : float_to_f16(v); }
double value16(uint16_t b, bool bf16) { return bf16 ? double(bf16_to_float(b)) : double(f16_to_float(b)); }

Tensor device_words(const std::vector<uint32_t>& w) {
  std::vector<int32_t> v(w.size());
  std::memcpy(v.data(), w.data(), w.size() * 4);
  return Tensor::from_ints(v, {int64_t(v.size())}, kEmu);
}
std::vector<uint32_t> host_words(const Tensor& t) {
  const Tensor c = t.to(kCPU);
  std::vector<uint32_t> w(size_t(c.numel()));
  std::memcpy(w.data(), c.data_ptr(), w.size() * 4);
  return w;
}

}  // namespace

TEST_CASE("tensor cores: mma.sync m16n8k16 and m16n8k8, bf16 and f16, every lane and register", "[emu][kernels]") {
  for (int kind = 0; kind < 4; ++kind) {
    const bool k16 = kind < 2, bf16 = kind % 2 == 0;
    const int K = k16 ? 16 : 8;
    INFO("kind " << kind << (k16 ? " m16n8k16 " : " m16n8k8 ") << (bf16 ? "bf16" : "f16"));
    const Tensor ra = Tensor::randn({16 * 16}, uint64_t(10 + kind)), rb = Tensor::randn({16 * 8}, uint64_t(20 + kind));
    const Tensor rc = Tensor::randn({32 * 4}, uint64_t(30 + kind));
    // The matrices, rounded to the 16-bit type.
    std::vector<uint16_t> A(16 * 16), B(16 * 8);
    for (int i = 0; i < 16 * K; ++i) A[size_t(i)] = bits16(ra.data<float>()[i], bf16);  // A[row * K + k]
    for (int i = 0; i < K * 8; ++i) B[size_t(i)] = bits16(rb.data<float>()[i], bf16);   // B[k * 8 + n]
    // Each lane's registers, from the PTX ISA's tables (lane = 4 g + t).
    std::vector<uint32_t> a(32 * 4, 0), b(32 * 2, 0);
    std::vector<float> c(32 * 4);
    const auto put = [](std::vector<uint32_t>& regs, int lane, int nregs, int e, uint16_t v) {
      regs[size_t(lane * nregs + e / 2)] |= uint32_t(v) << (16 * (e % 2));
    };
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int i = 0; i < (k16 ? 8 : 4); ++i) {
        const int row = k16 ? g + 8 * ((i >> 1) & 1) : g + 8 * (i >> 1);
        const int col = k16 ? 2 * t + (i & 1) + 8 * (i >> 2) : 2 * t + (i & 1);
        put(a, lane, 4, i, A[size_t(row * K + col)]);
      }
      for (int i = 0; i < (k16 ? 4 : 2); ++i) {
        const int k = k16 ? 2 * t + (i & 1) + 8 * (i >> 1) : 2 * t + i;
        put(b, lane, 2, i, B[size_t(k * 8 + g)]);
      }
      for (int i = 0; i < 4; ++i) c[size_t(lane * 4 + i)] = rc.data<float>()[lane * 4 + i];
    }
    const Tensor da = device_words(a), db = device_words(b);
    const Tensor dc = Tensor::from_vector(c, {32 * 4}).to(kEmu), dd = Tensor::zeros({32 * 4}, DType::f32, kEmu);
    ENGINE_GPU_CALL(kEmu, tc_probe_mma, kind, static_cast<const uint32_t*>(da.data_ptr()),
                    static_cast<const uint32_t*>(db.data_ptr()), dc.data<float>(), dd.data<float>(), nullptr);
    const Tensor d = dd.to(kCPU);
    int wrong = 0;
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int g = lane / 4, t = lane % 4, row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        double s = double(c[size_t(lane * 4 + i)]), mag = std::fabs(s);
        for (int k = 0; k < K; ++k) {
          const double p = value16(A[size_t(row * K + k)], bf16) * value16(B[size_t(k * 8 + col)], bf16);
          s += p, mag += std::fabs(p);
        }
        const double got = d.data<float>()[lane * 4 + i];
        const bool ok = kEmu.type == DeviceType::emu ? got == double(float(s)) : std::fabs(got - s) <= mag * 0x1p-20;
        if (!ok && ++wrong <= 5)
          FAIL_CHECK("lane " << lane << " d" << i << " (row " << row << ", col " << col << "): " << got << ", expected "
                             << s);
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("tensor cores: ldmatrix x1, x2, x4, with and without .trans, rows anywhere in shared memory",
          "[emu][kernels]") {
  const int rows = 40;
  std::vector<uint32_t> tile(size_t(rows) * 4);  // rows x 8 16-bit elements, two per word
  for (size_t i = 0; i < tile.size(); ++i) {
    const uint32_t e = uint32_t(2 * i);  // element e = row * 8 + column: a value that names it
    tile[i] = (e + 1000) | (e + 1001) << 16;
  }
  const auto element = [&](int row, int col) { return uint32_t(row * 8 + col + 1000); };
  std::vector<int32_t> row_of_lane(32);
  for (int l = 0; l < 32; ++l) row_of_lane[size_t(l)] = (l * 7 + 3) % rows;  // scattered, each row once
  const Tensor dtile = device_words(tile), drows = Tensor::from_ints(row_of_lane, {32}, kEmu);
  for (int count : {1, 2, 4})
    for (bool trans : {false, true}) {
      INFO("x" << count << (trans ? ".trans" : ""));
      const Tensor dout = Tensor::zeros({32 * count}, DType::i32, kEmu);
      ENGINE_GPU_CALL(kEmu, tc_probe_ldmatrix, count, trans, static_cast<const uint16_t*>(dtile.data_ptr()), rows,
                      drows.data<int32_t>(), static_cast<uint32_t*>(dout.data_ptr()), nullptr);
      const std::vector<uint32_t> out = host_words(dout);
      int wrong = 0;
      for (int m = 0; m < count; ++m) {
        // Matrix m: its row i is the shared row lane 8 m + i points at; M' is it or its transpose.
        uint32_t M[8][8];
        for (int i = 0; i < 8; ++i)
          for (int j = 0; j < 8; ++j) M[i][j] = element(row_of_lane[size_t(8 * m + i)], j);
        for (int l = 0; l < 32; ++l) {
          const int i = l / 4, j = 2 * (l % 4);
          const uint32_t lo = trans ? M[j][i] : M[i][j], hi = trans ? M[j + 1][i] : M[i][j + 1];
          const uint32_t want = lo | hi << 16, got = out[size_t(l * count + m)];
          if (got != want && ++wrong <= 5)
            FAIL_CHECK("matrix " << m << " lane " << l << ": " << std::hex << got << ", expected " << want);
        }
      }
      CHECK(wrong == 0);
    }
}

TEST_CASE("tensor cores: cp.async ca 4/8/16 and cg 16, a two-stage pipeline, zero-filled tails", "[emu][kernels]") {
  struct Case {
    int bytes;
    bool cg;
  };
  for (const Case cs : {Case{4, false}, Case{8, false}, Case{16, false}, Case{16, true}})
    for (int src_bytes : {cs.bytes, cs.bytes / 2, 0}) {
      INFO((cs.cg ? "cg " : "ca ") << cs.bytes << " bytes, src-size " << src_bytes);
      const int n_chunks = 3 * 64;
      std::vector<uint32_t> src(size_t(n_chunks * cs.bytes / 4));
      for (size_t i = 0; i < src.size(); ++i) src[i] = uint32_t(i * 2654435761u) & 0x7f7f7f7fu;  // no 0xFF byte
      const Tensor dsrc = device_words(src);
      const Tensor dout = device_words(std::vector<uint32_t>(src.size(), 0x07070707u));  // not the zero fill
      ENGINE_GPU_CALL(kEmu, tc_probe_cp_async, cs.bytes, cs.cg, dsrc.data_ptr(), n_chunks, src_bytes, dout.data_ptr(),
                      nullptr);
      const std::vector<uint32_t> out = host_words(dout);
      std::vector<unsigned char> want(src.size() * 4), got(out.size() * 4);
      std::memcpy(want.data(), src.data(), want.size());
      std::memcpy(got.data(), out.data(), got.size());
      for (int j = 0; j < n_chunks; ++j)
        for (int k = src_bytes; k < cs.bytes; ++k) want[size_t(j * cs.bytes + k)] = 0;
      CHECK(got == want);
    }
}
