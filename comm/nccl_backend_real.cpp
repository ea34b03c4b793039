// The NCCL backend against the real NCCL (cuda device): see nccl_backend.inc.
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/gpu_ops.h"
#define NCCL_REAL 1
#include "comm/nccl_backend.inc"

namespace eng::comm {
std::unique_ptr<Communicator> make_nccl_real_communicator(const Group& g, Device dev, CommOptions o) {
  return std::make_unique<NcclCommunicator>(g, dev, o);
}
}  // namespace eng::comm
