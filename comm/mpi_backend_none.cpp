// Builds without MPI (ENGINE_MPI=OFF): the world is one process, whose
// collectives never reach a backend (the group-of-one short cut).
#include "base/error.h"
#include "comm/backends.h"

namespace eng::comm {
std::unique_ptr<Communicator> make_mpi_communicator(const Group& g, Device dev, CommOptions o) {
  ENGINE_CHECK(g.size() == 1 && o.short_circuit, "comm: the mpi backend on ", dev.str(),
               " needs a build with MPI (ENGINE_MPI)");
  return make_local_communicator(g, dev, o);
}
}  // namespace eng::comm
