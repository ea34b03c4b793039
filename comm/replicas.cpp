// Parameter checksums compared across a group (see replicas.h).
#include "comm/replicas.h"

#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "comm/watchdog.h"

#if ENGINE_HAVE_MPI
#include "comm/mpi_util.h"
#endif

namespace eng::comm {

namespace {
uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
}  // namespace

void check_replicas(const std::vector<std::pair<std::string, Tensor>>& named, const Group& g) {
  if (g.size() == 1) return;
  std::vector<uint64_t> mine;
  for (const auto& [name, t] : named) {
    const Tensor host = t.to(kCPU);
    mine.push_back(fnv1a(static_cast<const uint8_t*>(host.data_ptr()), host.nbytes()));
  }
  std::vector<uint64_t> all(mine.size() * size_t(g.size()));
#if ENGINE_HAVE_MPI
  const WatchedCall watch(cat("all_gather of the parameter checksums on group ", g.name(), " (--check_replicas)"));
  MPI_CHECK(MPI_Allgather(mine.data(), int(mine.size()), MPI_UINT64_T, all.data(), int(mine.size()), MPI_UINT64_T,
                          g.handle()->comm));
#else
  ENGINE_FAIL("check_replicas: a group of ", g.size(), " without MPI");
#endif
  for (int r = 1; r < g.size(); ++r)
    for (size_t i = 0; i < mine.size(); ++i)
      if (all[size_t(r) * mine.size() + i] != all[i])
        throw ReplicaDrift(cat("replicas drifted: parameter ", named[i].first, " ", named[i].second.desc(), " on ",
                               g.name(), " rank ", r, " (world rank ", g.world_ranks()[size_t(r)], ") differs from ",
                               g.name(), " rank 0"));
}

}  // namespace eng::comm
