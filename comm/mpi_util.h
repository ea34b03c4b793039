// Private to comm/: MPI error checking and the MPI communicator behind a
// Group. Only compiled with MPI (ENGINE_HAVE_MPI).
#pragma once
#include <mpi.h>

#include <string>

#include "base/error.h"

namespace eng::comm {

std::string mpi_error_string(int code);

// MPI returns codes (MPI_ERRORS_RETURN is set on every communicator we use).
#define MPI_CHECK(call)                                                                               \
  do {                                                                                                \
    const int mpi_rc_ = (call);                                                                       \
    ENGINE_CHECK(mpi_rc_ == MPI_SUCCESS, #call, " failed: ", ::eng::comm::mpi_error_string(mpi_rc_)); \
  } while (0)

struct GroupHandle {
  MPI_Comm comm = MPI_COMM_NULL;
  ~GroupHandle();
};

}  // namespace eng::comm
