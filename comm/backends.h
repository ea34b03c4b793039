// Private to comm/: the backends' factories (communicator.cpp picks one).
#pragma once
#include <memory>

#include "comm/communicator.h"

namespace eng::comm {
std::unique_ptr<Communicator> make_mpi_communicator(const Group& g, Device dev, CommOptions o);
// nccl_backend.inc compiled against the look-alike (emu) and, in CUDA builds
// with libnccl, against the real NCCL (cuda).
std::unique_ptr<Communicator> make_nccl_emu_communicator(const Group& g, Device dev, CommOptions o);
std::unique_ptr<Communicator> make_nccl_real_communicator(const Group& g, Device dev, CommOptions o);
// A group of one with the short cut on: the base class answers every call.
std::unique_ptr<Communicator> make_local_communicator(const Group& g, Device dev, CommOptions o);
}  // namespace eng::comm
