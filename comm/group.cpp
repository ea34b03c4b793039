// Groups over MPI communicators.
#include "comm/group.h"

#include "base/error.h"
#include "comm/watchdog.h"
#include "comm/world.h"

#if ENGINE_HAVE_MPI
#include "comm/mpi_util.h"
#endif

namespace eng::comm {

Group::Group() : world_ranks_{world().rank} {}

Group Group::world_group() {
  Group g;
  g.name_ = "world";
  g.rank_ = world().rank;
  g.world_ranks_.clear();
  for (int r = 0; r < world().size; ++r) g.world_ranks_.push_back(r);
#if ENGINE_HAVE_MPI
  if (world().mpi) {
    g.handle_ = std::make_shared<GroupHandle>();
    g.handle_->comm = MPI_COMM_WORLD;  // not freed by ~GroupHandle
  }
#endif
  return g;
}

Group Group::split(const std::string& name, int color, int key) const {
  Group g;
  g.name_ = name;
#if ENGINE_HAVE_MPI
  if (handle_) {
    const WatchedCall watch(cat("the creation of group ", name, " (MPI_Comm_split of group ", name_, ")"));
    g.handle_ = std::make_shared<GroupHandle>();
    MPI_CHECK(MPI_Comm_split(handle_->comm, color, key, &g.handle_->comm));
    MPI_Comm_set_errhandler(g.handle_->comm, MPI_ERRORS_RETURN);
    int rank = 0, size = 0;
    MPI_CHECK(MPI_Comm_rank(g.handle_->comm, &rank));
    MPI_CHECK(MPI_Comm_size(g.handle_->comm, &size));
    g.rank_ = rank;
    g.world_ranks_.assign(size_t(size), 0);
    const int me = world().rank;
    MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, g.world_ranks_.data(), 1, MPI_INT, g.handle_->comm));
    return g;
  }
#endif
  (void)color, (void)key;
  ENGINE_CHECK(size() == 1, "group ", name_, ": split without MPI");
  return g;
}

}  // namespace eng::comm
