// Entry point of the distributed tests (dist_tests): one process per rank
// under `mpirun -np N` (tests/CMakeLists.txt runs N = 1..4 through
// scripts/mpirun.sh), or alone without a launcher (a world of one, no MPI).
// Every rank runs every test case in the same order, so the collectives
// inside them match up; tests use CHECK, not REQUIRE, so that a failing
// check does not leave the other ranks waiting in a collective.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "comm/world.h"

int main(int argc, char** argv) {
  try {
    eng::comm::init_world();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_tests: %s\n", e.what());
    return 1;
  }
  const int rc = Catch::Session().run(argc, argv);
  // One rank's failure must fail the job even if the others passed.
  const double worst = eng::comm::all_reduce_host(double(rc != 0), eng::comm::HostOp::max);
  eng::comm::finalize_world();
  return worst > 0 ? (rc ? rc : 1) : 0;
}
