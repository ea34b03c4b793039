// The dp x cp x tp grid over the world.
#include "comm/grid.h"

#include "base/error.h"
#include "comm/world.h"

namespace eng::comm {

Grid::Grid(int tp, int cp) : world_(Group::world_group()) {
  const int n = world().size, r = world().rank;
  ENGINE_CHECK(tp >= 1 && cp >= 1, "grid: tp = ", tp, " and cp = ", cp, " must be >= 1");
  if (cp == 1)
    ENGINE_CHECK(n % tp == 0, "grid: tp = ", tp, " does not divide the world size ", n, " (world = dp x tp)");
  ENGINE_CHECK(n % (tp * cp) == 0, "grid: tp x cp = ", tp, " x ", cp, " does not divide the world size ", n,
               " (world = dp x cp x tp)");
  const int t = r % tp, c = (r / tp) % cp, d = r / (tp * cp);
  // Each group: the ranks that share the other coordinates (color), in the order of its own (key).
  tp_ = world_.split("tp", r / tp, t);
  cp_ = world_.split("cp", d * tp + t, c);
  dp_ = world_.split("dp", c * tp + t, d);
  dp_cp_ = world_.split("dpcp", t, r / tp);
}

}  // namespace eng::comm
