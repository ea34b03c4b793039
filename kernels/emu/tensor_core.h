// The warp-level matrix instructions under the emulator: mma.sync, ldmatrix
// and cp.async, as kernels/cuda/tensor_core.cuh calls them under g++ (never
// included directly). The fragment layouts are the PTX ISA's (docs/emulator.md,
// "Tensor cores", draws them): lane = 4 g + t,
//   m16n8k16 A (16 x 16, row-major), 4 registers, 8 elements a_0..a_7:
//            a_i at row g + 8 ((i >> 1) & 1), column 2 t + (i & 1) + 8 (i >> 2);
//            B (16 x 8, "col"), 2 registers, b_0..b_3: k = 2 t + (i & 1) + 8 (i >> 1), n = g;
//   m16n8k8  A 2 registers, a_0..a_3: row g + 8 (i >> 1), column 2 t + (i & 1);
//            B 1 register, b_0, b_1: k = 2 t + i, n = g;
//   C and D (16 x 8, fp32), c_0..c_3: row g + 8 (i >> 1), column 2 t + (i & 1);
// element 2 j of a packed register in its low 16 bits, 2 j + 1 in its high.
// Each lane posts its registers to the warp's exchange (warp.cpp: all 32
// lanes at one call site), then computes its own outputs from everyone's:
// the work is done in the kernel's own code, so the race check sees the
// shared-memory reads as the lane's. Arithmetic: the products of two 16-bit
// floats are exact in double, the k-sum and c are added in double and rounded
// to fp32 once. A GPU's tensor core adds in an order and with an internal
// precision the PTX ISA leaves open, so results on a GPU may differ in the
// last bits of fp32: tests compare with a tolerance that allows it.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/error.h"

namespace emu::tc {

enum class Mma : uint32_t { m16n8k16_bf16, m16n8k16_f16, m16n8k8_bf16, m16n8k8_f16 };
inline const char* mma_name(Mma m) {
  switch (m) {
    case Mma::m16n8k16_bf16:
      return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case Mma::m16n8k16_f16:
      return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    case Mma::m16n8k8_bf16:
      return "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32";
    case Mma::m16n8k8_f16:
      return "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32";
  }
  return "mma.sync";
}

// Element e (0 = low half) of packed register r of a lane's block.
inline double element(const uint32_t* regs, int e, bool bf16) {
  const uint16_t bits = uint16_t(regs[e >> 1] >> (16 * (e & 1)));
  return bf16 ? double(eng::bf16_to_float(bits)) : double(eng::f16_to_float(bits));
}

inline int lane_now() { return int(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32; }

// d = a b + c for this lane's four elements of D.
inline void mma(Mma kind, float* d, const uint32_t* a, const uint32_t* b, const float* c, const char* file, int line) {
  struct Regs {
    uint32_t a[4], b[2];
  } mine{};
  const bool k16 = kind == Mma::m16n8k16_bf16 || kind == Mma::m16n8k16_f16;
  const bool bf16 = kind == Mma::m16n8k16_bf16 || kind == Mma::m16n8k8_bf16;
  std::memcpy(mine.a, a, sizeof(uint32_t) * (k16 ? 4 : 2));
  std::memcpy(mine.b, b, sizeof(uint32_t) * (k16 ? 2 : 1));
  const unsigned char* all = ::emu::warp_exchange(&mine, int(sizeof(Regs)), uint32_t(kind), mma_name(kind), file, line);
  const auto regs = [&](int lane) {
    Regs r;
    std::memcpy(&r, all + size_t(lane) * sizeof(Regs), sizeof(Regs));
    return r;
  };
  // Who holds A(row, k) and B(k, n): the layouts above, inverted.
  const auto A = [&](int row, int k) {
    const int lane = 4 * (row % 8) + (k % 8) / 2;
    const int e = k16 ? (k & 1) + 2 * (row / 8) + 4 * (k / 8) : (k & 1) + 2 * (row / 8);
    return element(regs(lane).a, e, bf16);
  };
  const auto B = [&](int k, int n) {
    const int lane = 4 * n + (k % 8) / 2;
    const int e = k16 ? (k & 1) + 2 * (k / 8) : (k & 1);
    return element(regs(lane).b, e, bf16);
  };
  const int lane = lane_now(), g = lane / 4, t = lane % 4, K = k16 ? 16 : 8;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    double s = double(c[i]);
    for (int k = 0; k < K; ++k) s += A(row, k) * B(k, col);
    out[i] = float(s);
  }
  std::memcpy(d, out, sizeof out);  // d may alias c
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lane 8 m + r gives
// the shared address of row r of matrix m (16 bytes, 16-byte aligned; lanes
// past 8 x count give none); lane l gets, of matrix m, the elements
// (row l / 4, columns 2 (l % 4), +1), or with .trans (rows 2 (l % 4), +1, column l / 4).
inline void ldmatrix(int count, bool trans, uint32_t* r, uint32_t addr, const char* file, int line) {
  const char* name =
      count == 1
          ? (trans ? "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16" : "ldmatrix.sync.aligned.m8n8.x1.shared.b16")
      : count == 2
          ? (trans ? "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" : "ldmatrix.sync.aligned.m8n8.x2.shared.b16")
          : (trans ? "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" : "ldmatrix.sync.aligned.m8n8.x4.shared.b16");
  const int lane = lane_now();
  uint16_t row[8] = {};
  if (lane < 8 * count) std::memcpy(row, ::emu::shared_pointer(addr, 16, 16, name, file, line), 16);
  const unsigned char* all =
      ::emu::warp_exchange(row, int(sizeof row), uint32_t(count * 2 + (trans ? 1 : 0)), name, file, line);
  const auto at = [&](int m, int rr, int cc) {
    uint16_t v;
    std::memcpy(&v, all + (size_t(8 * m + rr) * 8 + size_t(cc)) * 2, 2);
    return uint32_t(v);
  };
  for (int m = 0; m < count; ++m) {
    const int q = lane / 4, p = 2 * (lane % 4);
    r[m] = trans ? at(m, p, q) | at(m, p + 1, q) << 16 : at(m, q, p) | at(m, q, p + 1) << 16;
  }
}

// cp.async.{ca,cg}.shared.global [dst], [src], bytes, src_bytes: checked,
// queued, and the destination poisoned until the wait that lands it (async.cpp;
// cp_async_wait below poisons it again at every wait it outlives).
inline void cp_async(const char* name, uint32_t dst, const void* src, int bytes, int src_bytes, const char* file,
                     int line) {
  unsigned char* d = ::emu::shared_pointer(dst, size_t(bytes), size_t(bytes), name, file, line);
  if (reinterpret_cast<uintptr_t>(src) % uintptr_t(bytes))
    eng::throw_error(
        file, line,
        eng::cat(name, " in lane ", lane_now(), ": the global source ", src, " is not ", bytes, "-byte aligned"));
  if (src_bytes < 0 || src_bytes > bytes)
    eng::throw_error(file, line,
                     eng::cat(name, " in lane ", lane_now(), ": src-size ", src_bytes, " is outside [0, ", bytes, "]"));
  std::memset(d, 0xFF, size_t(bytes));  // undefined until the wait: a NaN to whoever reads it early
  ::emu::cp_async_issue({d, static_cast<const unsigned char*>(src), bytes, src_bytes}, file, line);
}

// Lands the copies the wait covers, in issue order, then poisons again the
// destinations of those still pending: on a GPU they may land at any moment
// from now on, so an older copy that just landed over one of them must not
// be read as if it were the pending one's data.
inline void cp_async_wait(int newest_pending, const char* file, int line) {
  for (const ::emu::AsyncCopy& c : ::emu::cp_async_wait(newest_pending, file, line)) {
    if (c.src_bytes) std::memcpy(c.dst, c.src, size_t(c.src_bytes));
    if (c.src_bytes < c.bytes) std::memset(c.dst + c.src_bytes, 0, size_t(c.bytes - c.src_bytes));
  }
  for (const ::emu::AsyncCopy& c : ::emu::cp_async_pending(file, line)) std::memset(c.dst, 0xFF, size_t(c.bytes));
}

}  // namespace emu::tc
