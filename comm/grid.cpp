// The dp x tp grid over the world.
#include "comm/grid.h"

#include "base/error.h"
#include "comm/world.h"

namespace eng::comm {

Grid::Grid(int tp) : world_(Group::world_group()) {
  const int n = world().size, r = world().rank;
  ENGINE_CHECK(tp >= 1 && n % tp == 0, "grid: tp = ", tp, " does not divide the world size ", n, " (world = dp x tp)");
  // dp group: same tp_rank (color), ordered by dp_rank; tp group: same dp_rank.
  dp_ = world_.split("dp", r % tp, r / tp);
  tp_ = world_.split("tp", r / tp, r % tp);
}

}  // namespace eng::comm
