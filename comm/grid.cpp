// The pp x dp x cp x tp grid over the world.
#include "comm/grid.h"

#include "base/error.h"
#include "comm/world.h"

namespace eng::comm {

Grid::Grid(int tp, int cp, int pp) : world_(Group::world_group()) {
  const int n = world().size, r = world().rank;
  ENGINE_USER_CHECK(tp >= 1 && cp >= 1 && pp >= 1, "grid: tp = ", tp, ", cp = ", cp, " and pp = ", pp, " must be >= 1");
  if (cp == 1 && pp == 1)
    ENGINE_USER_CHECK(n % tp == 0, "grid: tp = ", tp, " does not divide the world size ", n, " (world = dp x tp)");
  if (pp == 1)
    ENGINE_USER_CHECK(n % (tp * cp) == 0, "grid: tp x cp = ", tp, " x ", cp, " does not divide the world size ", n,
                      " (world = dp x cp x tp)");
  ENGINE_USER_CHECK(n % (tp * cp * pp) == 0, "grid: pp x cp x tp = ", pp, " x ", cp, " x ", tp,
                    " does not divide the world size ", n, " (world = pp x dp x cp x tp)");
  const int dp = n / (tp * cp * pp), stage_size = dp * cp * tp;
  const int t = r % tp, c = (r / tp) % cp, d = (r / (tp * cp)) % dp, p = r / stage_size;
  // Each group: the ranks that share the other coordinates (color), in the order of its own (key).
  tp_ = world_.split("tp", r / tp, t);
  cp_ = world_.split("cp", (p * dp + d) * tp + t, c);
  dp_ = world_.split("dp", (p * cp + c) * tp + t, d);
  dp_cp_ = world_.split("dpcp", p * tp + t, c + cp * d);
  pp_ = world_.split("pp", r % stage_size, p);
  // The first and last stage of each pp group; every other rank alone.
  const bool end_stage = p == 0 || p == pp - 1;
  embed_ = world_.split("embed", end_stage ? r % stage_size : stage_size + r, p);
}

}  // namespace eng::comm
