// The world: launcher detection, MPI start-up and host-side agreement.
#include "comm/world.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "base/error.h"
#include "comm/watchdog.h"

#if ENGINE_HAVE_MPI
#include "comm/mpi_util.h"
#endif

namespace eng::comm {

namespace {
World g_world;
bool g_init = false;
std::mutex g_mu;
}  // namespace

bool mpi_built() { return ENGINE_HAVE_MPI != 0; }

std::string launcher_env() {
  // mpirun (Open MPI), PMIx (srun --mpi=pmix, prterun), PMI-1/2 (MPICH,
  // srun --mpi=pmi2). SLURM_PROCID alone is not enough: a batch script's
  // own shell has it too; srun sets SLURM_NTASKS > 1 for a job step.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return v;
  const char* nt = std::getenv("SLURM_NTASKS");
  if (std::getenv("SLURM_PROCID") && nt && std::atoi(nt) > 1) return "SLURM_PROCID";
  return "";
}

const World& init_world() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init) return g_world;
  g_init = true;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  g_world.host = host;
  const std::string env = launcher_env();
  if (env.empty()) return g_world;  // a plain ./train: a world of one, no MPI
#if ENGINE_HAVE_MPI
  int provided = 0;
  // THREAD_MULTIPLE: the --comm_timeout watchdog polls from its own thread.
  MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  ENGINE_CHECK(provided >= MPI_THREAD_SERIALIZED, "MPI provides thread level ", provided,
               ", the engine needs MPI_THREAD_SERIALIZED at least");
  g_world.mpi = true;
  g_world.thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_world.size));
  MPI_Comm local;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &local));
  MPI_CHECK(MPI_Comm_rank(local, &g_world.local_rank));
  MPI_CHECK(MPI_Comm_size(local, &g_world.local_size));
  MPI_Comm_free(&local);
#else
  ENGINE_FAIL("launched by mpirun/srun (", env,
              " is set) but this build has no MPI (ENGINE_MPI=OFF): ", "rebuild with MPI, or run without the launcher");
#endif
  return g_world;
}

const World& world() { return g_init ? g_world : init_world(); }

void finalize_world() {
#if ENGINE_HAVE_MPI
  int fin = 0;
  if (g_world.mpi && MPI_Finalized(&fin) == MPI_SUCCESS && !fin) MPI_Finalize();
#endif
}

void abort_world(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#if ENGINE_HAVE_MPI
  if (g_world.mpi && g_world.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
  finalize_world();
#endif
  std::exit(code);
}

#if ENGINE_HAVE_MPI
std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, size_t(len));
}

GroupHandle::~GroupHandle() {
  int fin = 0;
  if (comm != MPI_COMM_NULL && comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF && MPI_Finalized(&fin) == MPI_SUCCESS &&
      !fin)
    MPI_Comm_free(&comm);
}
#endif

#if ENGINE_HAVE_MPI
namespace {
// The watchdog's name for a host-side collective on the world.
std::string on_world(const char* op, const std::string& what) {
  return cat(op, " on world (", world().size, " ranks, host, ", what, ")");
}
}  // namespace
#endif

void barrier_world(const std::string& what) {
#if ENGINE_HAVE_MPI
  if (world().size == 1) return;
  const WatchedCall watch(on_world("barrier", what));
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
#else
  (void)what;
#endif
}

std::vector<std::string> all_gather_strings(const std::string& mine, const std::string& what) {
  if (world().size == 1) return {mine};
#if ENGINE_HAVE_MPI
  const WatchedCall watch(on_world("all_gather", what));
  const int n = world().size;
  int len = int(mine.size());
  std::vector<int> lens(static_cast<size_t>(n)), offs(static_cast<size_t>(n));
  MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < n; ++r) offs[size_t(r)] = total, total += lens[size_t(r)];
  std::string all(size_t(total), '\0');
  MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(size_t(offs[size_t(r)]), size_t(lens[size_t(r)])));
  return out;
#else
  (void)what;
  return {mine};
#endif
}

std::vector<double> all_reduce_host(const std::vector<double>& v, HostOp op, const std::string& what) {
  if (world().size == 1) return v;
#if ENGINE_HAVE_MPI
  const WatchedCall watch(on_world("all_reduce", what));
  std::vector<double> out(v.size());
  const MPI_Op mop = op == HostOp::sum ? MPI_SUM : op == HostOp::min ? MPI_MIN : MPI_MAX;
  MPI_CHECK(MPI_Allreduce(v.data(), out.data(), int(v.size()), MPI_DOUBLE, mop, MPI_COMM_WORLD));
  return out;
#else
  (void)op, (void)what;
  return v;
#endif
}

double all_reduce_host(double v, HostOp op, const std::string& what) {
  return all_reduce_host(std::vector<double>{v}, op, what)[0];
}

std::string broadcast_string(const std::string& s, int root, const std::string& what) {
  if (world().size == 1) return s;
#if ENGINE_HAVE_MPI
  const WatchedCall watch(on_world("broadcast", what));
  int len = int(s.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, root, MPI_COMM_WORLD));
  std::string out = world().rank == root ? s : std::string(size_t(len), '\0');
  MPI_CHECK(MPI_Bcast(out.data(), len, MPI_CHAR, root, MPI_COMM_WORLD));
  return out;
#else
  (void)root, (void)what;
  return s;
#endif
}

}  // namespace eng::comm
