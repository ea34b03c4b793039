// train's error exit (see error_exit.h).
#include "models/train/error_exit.h"

#include <cstdio>
#include <new>
#include <string>

#include "comm/world.h"
#include "models/train/train_dist.h"

namespace eng::models {

int run_or_report(const std::function<int()>& run) {
  try {
    return run();
  } catch (const WorldError& e) {  // every rank found it: rank 0 says it, all exit
    std::fflush(stdout);
    if (comm::world().rank == 0) std::fprintf(stderr, "train: error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    // A host allocation outside the engine's allocator (a std::vector) failed.
    const std::string what = dynamic_cast<const std::bad_alloc*>(&e)
                                 ? "out of host memory (" + std::string(e.what()) +
                                       "): a smaller batch_size, or --memory_limit_gb to plan for less"
                                 : e.what();
    if (comm::world().size > 1) {
      std::fprintf(stderr, "rank %d: train: error: %s\n", comm::world().rank, what.c_str());
      comm::abort_world(1);
    }
    std::fprintf(stderr, "train: error: %s\n", what.c_str());
  }
  return 1;
}

}  // namespace eng::models
