// The NCCL backend against the look-alike (emu device): see nccl_backend.inc.
#include "comm/nccl_emu/nccl.h"
#define NCCL_REAL 0
namespace eng::comm {
using namespace emu_nccl;  // the look-alike's ncclXxx, as the real header's would be found
}
#include "comm/nccl_backend.inc"

namespace eng::comm {
std::unique_ptr<Communicator> make_nccl_emu_communicator(const Group& g, Device dev, CommOptions o) {
  return std::make_unique<NcclCommunicator>(g, dev, o);
}
}  // namespace eng::comm
