// The world: every process of one training job, as MPI started them.
// `mpirun -np N ./train ...` (or `srun`) starts N processes; each learns its
// rank, the world size and its local rank on its node (MPI_Comm_split_type
// SHARED), which picks its GPU. A plain `./train` without a launcher is a
// world of one and never touches MPI, so it needs no MPI daemon (and a build
// without MPI, ENGINE_MPI=OFF, is always a world of one).
// Host-side agreement (the config every rank parsed, a loss to average, a
// barrier) goes over MPI_COMM_WORLD with the helpers below; device data goes
// through a Communicator (communicator.h).
// Errors: MPI calls return codes (MPI_ERRORS_RETURN) that become eng::Error;
// a failing rank ends the whole job with abort_world (MPI_Abort), since a
// collective the other ranks wait in would otherwise never finish.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace eng::comm {

struct World {
  int rank = 0, size = 1;              // in MPI_COMM_WORLD
  int local_rank = 0, local_size = 1;  // on this node (shared memory)
  std::string host;                    // this node's name
  bool mpi = false;                    // MPI was initialised (launched by mpirun/srun)
  bool thread_multiple = false;        // MPI_THREAD_MULTIPLE: any thread may call MPI (the watchdog's abort)
};

bool mpi_built();                         // compiled with MPI (ENGINE_MPI)
std::string launcher_env();               // the launcher variable that says we run under mpirun/srun, "" if none
const World& init_world();                // idempotent; MPI_Init_thread only under a launcher
const World& world();                     // init_world() if not done yet
void finalize_world();                    // MPI_Finalize if we initialised it (at normal exit)
[[noreturn]] void abort_world(int code);  // MPI_Abort: ends every rank of the job

// Host-side agreement over the whole world (collective: every rank calls).
// Each is under the --comm_timeout watchdog (comm/watchdog.h): `what` says
// what it carries in the timeout's message ("the step's loss").
void barrier_world(const std::string& what = "a barrier");
std::vector<std::string> all_gather_strings(const std::string& mine, const std::string& what = "strings");
enum class HostOp { sum, min, max };
double all_reduce_host(double v, HostOp op = HostOp::sum, const std::string& what = "a value");
std::vector<double> all_reduce_host(const std::vector<double>& v, HostOp op = HostOp::sum,
                                    const std::string& what = "values");
// Rank `root`'s bytes, on every rank.
std::string broadcast_string(const std::string& s, int root = 0, const std::string& what = "a string");

}  // namespace eng::comm
