// Helpers for the distributed tests: the devices and backends every
// collective is checked on, and the values each rank contributes.
#pragma once
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/world.h"

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

}  // namespace dist_test
