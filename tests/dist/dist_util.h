// Helpers for the distributed tests: the devices and backends every
// collective is checked on, and the values each rank contributes.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/world.h"
#include "engine/ops.h"

namespace dist_test {

struct Setup {
  eng::Device dev;
  eng::comm::Backend backend;
  std::string name() const { return dev.str() + "/" + eng::comm::backend_name(backend); }
};
// cpu over MPI, emu over MPI, emu over the NCCL look-alike (the NCCL
// backend's source, executed).
inline std::vector<Setup> setups() {
  using eng::Device;
  using eng::DeviceType;
  using eng::comm::Backend;
  return {{Device{DeviceType::cpu, 0}, Backend::mpi},
          {Device{DeviceType::emu, 0}, Backend::mpi},
          {Device{DeviceType::emu, 0}, Backend::nccl}};
}

// Rank r's element i: small integers, exact in bf16 and in any summation
// order, so sums are compared exactly and averages to one rounding.
inline float value(int r, int64_t i) { return float(((r + 1) * (i * 7 + 3)) % 23 - 11); }
inline std::vector<float> values(int r, int64_t n, int64_t first = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(r, first + i);
  return v;
}

// Equal on every rank, bit for bit: the max and the -max over ranks are both x.
inline bool same_on_every_rank(const eng::Tensor& x, eng::comm::Communicator& c) {
  using eng::comm::ReduceOp;
  eng::Tensor hi = x.detach().clone(), lo = eng::scale(x.detach(), -1.0);
  c.all_reduce(hi, ReduceOp::max).wait();
  c.all_reduce(lo, ReduceOp::max).wait();
  return hi.to_vector() == x.to_vector() && eng::scale(lo, -1.0).to_vector() == x.to_vector();
}

}  // namespace dist_test
