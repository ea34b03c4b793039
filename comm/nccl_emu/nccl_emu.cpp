// The NCCL look-alike over MPI (see nccl.h for what it covers and why).
// Calls validate and return at once; their data work is a closure run in the
// emulator's stream order (emu::enqueue), doing blocking MPI on host scratch
// copies, so in-place forms work and MPI never sees aliased buffers. Buffers
// are small in CI: correctness and NCCL's contract matter here, not speed.
#include "comm/nccl_emu/nccl.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#if ENGINE_HAVE_MPI
#include <mpi.h>
#endif

#include "base/dtype.h"
#include "base/error.h"
#include "engine/device.h"
#include "kernels/emu/graph.h"

namespace emu_nccl {

struct ncclComm {
  int nranks = 1, rank = 0;
#if ENGINE_HAVE_MPI
  MPI_Comm mpi = MPI_COMM_NULL;  // the participants, ordered by nccl rank; null when nranks == 1
#endif
  ncclResult_t async = ncclSuccess;  // an error inside a stream-ordered collective
};

namespace {

using eng::cat;
constexpr char kMagic[8] = {'E', 'M', 'U', 'N', 'C', 'C', 'L', '1'};
constexpr size_t kMaxChunk = INT_MAX / 2;                    // MPI counts are int: larger calls go in chunks
std::atomic<int> g_id_counter{0};                            // makes each ncclGetUniqueId of this process distinct
thread_local std::string t_last;                             // NCCL's last error is per thread
thread_local int t_group_depth = 0;                          // ncclGroupStart nesting, per thread as in NCCL
thread_local std::vector<std::function<void()>> t_deferred;  // calls waiting for the outermost ncclGroupEnd

// A send or receive, deferred like the collectives inside a group.
struct P2p {
  ncclComm_t comm;
  bool send;
  void* buf;
  size_t bytes;
  int peer;
};
thread_local std::vector<P2p> t_p2p;  // the group's sends and receives

ncclResult_t fail(ncclResult_t rc, std::string msg) {
  t_last = std::move(msg);
  return rc;
}

// Indexed by ncclDataType_t (ncclInt8 = 0 ... ncclBfloat16 = 9); fp8 (10, 11) is not covered.
struct TypeInfo {
  const char* name;
  size_t size;
};
constexpr TypeInfo kTypes[] = {{"int8", 1},   {"uint8", 1},   {"int32", 4},   {"uint32", 4},  {"int64", 8},
                               {"uint64", 8}, {"float16", 2}, {"float32", 4}, {"float64", 8}, {"bfloat16", 2}};
size_t elem_size(ncclDataType_t t) { return unsigned(t) < 10 ? kTypes[t].size : 0; }
const char* type_name(ncclDataType_t t) { return unsigned(t) < 10 ? kTypes[t].name : "unknown"; }
bool is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64;
}

// The checks every collective makes before its buffers: a comm, a known
// type, and for reductions an op and type pair the look-alike implements.
ncclResult_t check_call(const char* call, ncclComm_t comm, ncclDataType_t t, const ncclRedOp_t* op) {
  if (!comm) return fail(ncclInvalidArgument, cat(call, ": comm is null"));
  if (elem_size(t) == 0) return fail(ncclInvalidArgument, cat(call, ": datatype ", int(t), " is not covered"));
  if (!op) return ncclSuccess;
  if (*op != ncclSum && *op != ncclAvg && *op != ncclMax)
    return fail(ncclInvalidArgument,
                cat(call, ": op ", int(*op), " is not covered (ncclSum, ncclAvg and ncclMax only)"));
  if (elem_size(t) == 1) return fail(ncclInvalidArgument, cat(call, ": 8-bit types are not reduced"));
  if (*op == ncclAvg && !is_float(t))
    return fail(ncclInvalidArgument, cat(call, ": ncclAvg on ", type_name(t), " (float types only here)"));
  return ncclSuccess;
}

// The buffer must hold blocks x count elements from p inside one live emu
// allocation; a count in bytes gives 2-8 times too many and is caught here.
ncclResult_t check_buffer(const char* call, const char* name, const void* p, int blocks, size_t count,
                          const char* count_name, ncclDataType_t t) {
  if (!p) return fail(ncclInvalidArgument, cat(call, ": ", name, " is null"));
  const size_t es = elem_size(t), need = size_t(blocks) * count * es;
  const size_t have = eng::allocator_for(eng::Device{eng::DeviceType::emu, 0}).extent_from(p);
  if (have >= need) return ncclSuccess;
  if (have == 0) return fail(ncclInvalidArgument, cat(call, ": ", name, " is not inside a live emu allocation"));
  const std::string ranks = blocks > 1 ? cat(blocks, " ranks x ") : "";
  const std::string hint = es > 1 ? cat(": is ", count_name, " in bytes instead of elements?") : "";
  return fail(ncclInvalidArgument, cat(call, ": ", name, " holds ", have, " bytes from its address, the call needs ",
                                       need, " (", ranks, count_name, " ", count, " x ", type_name(t), ", ", es,
                                       es > 1 ? " bytes each)" : " byte each)", hint));
}

// Stream-ordered work cannot return an error: like NCCL, record it as the
// comm's async error (ncclCommGetAsyncError) and the last error message.
void async_fail(ncclComm_t c, const std::string& msg) {
  c->async = ncclSystemError;
  t_last = msg;
}

// Runs `work` in stream order now, or at the outermost ncclGroupEnd. The
// closures hold the comm pointer: as with NCCL, a captured graph must not
// outlive the communicator it uses.
ncclResult_t submit(ncclComm_t c, std::function<void()> work) {
  auto guarded = [c, work = std::move(work)] {
    try {
      work();
    } catch (const std::exception& e) {  // e.g. bad_alloc for scratch: never escapes into the emulator
      async_fail(c, e.what());
    }
  };
  if (t_group_depth > 0)
    t_deferred.push_back(std::move(guarded));
  else
    emu::enqueue(std::move(guarded));
  return ncclSuccess;
}

#if ENGINE_HAVE_MPI
// The look-alike never initialises MPI itself: the program (comm/world) does.
bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// The MPI type of the scratch a reduction sums in.
MPI_Datatype mpi_type(float) { return MPI_FLOAT; }
MPI_Datatype mpi_type(double) { return MPI_DOUBLE; }
MPI_Datatype mpi_type(int32_t) { return MPI_INT32_T; }
MPI_Datatype mpi_type(uint32_t) { return MPI_UINT32_T; }
MPI_Datatype mpi_type(int64_t) { return MPI_INT64_T; }
MPI_Datatype mpi_type(uint64_t) { return MPI_UINT64_T; }
#endif

// Element i of a buffer of type t, in the type W the sum runs in (16-bit
// floats widen to fp32: NCCL too accumulates them in fp32 and rounds once).
template <class W>
W load(const void* p, size_t i, ncclDataType_t t) {
  if constexpr (std::is_same_v<W, float>) {
    if (t == ncclFloat16) return eng::f16_to_float(static_cast<const uint16_t*>(p)[i]);
    if (t == ncclBfloat16) return eng::bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  return static_cast<const W*>(p)[i];
}
// ... and back, rounding 16-bit floats to nearest even.
template <class W>
void store(void* p, size_t i, ncclDataType_t t, W x) {
  if constexpr (std::is_same_v<W, float>) {
    if (t == ncclFloat16 || t == ncclBfloat16) {
      static_cast<uint16_t*>(p)[i] = t == ncclFloat16 ? eng::float_to_f16(x) : eng::float_to_bf16(x);
      return;
    }
  }
  static_cast<W*>(p)[i] = x;
}

// Sums `total` elements of send over the ranks in W and stores elements
// [first, first + n) of the sum into recv (divided by nranks for ncclAvg;
// the max for ncclMax).
template <class W>
void reduce_range(ncclComm_t c, const void* send, size_t total, ncclDataType_t t, ncclRedOp_t op, void* recv,
                  size_t first, size_t n) {
  std::vector<W> v(total);
  for (size_t i = 0; i < total; ++i) v[i] = load<W>(send, i, t);
#if ENGINE_HAVE_MPI
  for (size_t at = 0; c->nranks > 1 && at < total; at += kMaxChunk) {
    const int k = int(std::min(kMaxChunk, total - at));
    if (int rc =
            MPI_Allreduce(MPI_IN_PLACE, v.data() + at, k, mpi_type(W{}), op == ncclMax ? MPI_MAX : MPI_SUM, c->mpi))
      return async_fail(c, cat("MPI_Allreduce failed (MPI error ", rc, ")"));
  }
#endif
  for (size_t i = 0; i < n; ++i) {
    W x = v[first + i];
    if constexpr (std::is_floating_point_v<W>)
      if (op == ncclAvg) x /= W(c->nranks);
    store<W>(recv, i, t, x);
  }
}
void reduce(ncclComm_t c, const void* send, size_t total, ncclDataType_t t, ncclRedOp_t op, void* recv, size_t first,
            size_t n) {
  switch (t) {
    case ncclFloat64:
      return reduce_range<double>(c, send, total, t, op, recv, first, n);
    case ncclInt32:
      return reduce_range<int32_t>(c, send, total, t, op, recv, first, n);
    case ncclUint32:
      return reduce_range<uint32_t>(c, send, total, t, op, recv, first, n);
    case ncclInt64:
      return reduce_range<int64_t>(c, send, total, t, op, recv, first, n);
    case ncclUint64:
      return reduce_range<uint64_t>(c, send, total, t, op, recv, first, n);
    default:
      return reduce_range<float>(c, send, total, t, op, recv, first, n);  // f32, f16, bf16
  }
}

// Root's `bytes` at p to every rank's p: one buffer, so no aliasing to avoid.
void bcast_bytes(ncclComm_t c, void* p, size_t bytes, int root) {
#if ENGINE_HAVE_MPI
  for (size_t at = 0; c->nranks > 1 && at < bytes; at += kMaxChunk) {
    const int k = int(std::min(kMaxChunk, bytes - at));
    if (int rc = MPI_Bcast(static_cast<char*>(p) + at, k, MPI_BYTE, root, c->mpi))
      return async_fail(c, cat("MPI_Bcast failed (MPI error ", rc, ")"));
  }
#else
  (void)c, (void)p, (void)bytes, (void)root;
#endif
}

#if ENGINE_HAVE_MPI
// Every participant tells the id's creator its nccl rank; the creator answers
// with the world ranks in nccl-rank order (all -1 when a rank was claimed
// twice, so that nobody waits forever), and the participants build an MPI
// communicator of just themselves: MPI_Comm_create_group is collective over
// the group only, as ncclCommInitRank is over its nranks callers.
ncclResult_t rendezvous(ncclComm* c, int creator, int tag) {
  const int n = c->nranks;
  int me = 0, rc = MPI_SUCCESS;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<int> ranks(size_t(n), -1);
  if (me == creator) {
    std::vector<int> senders;
    bool clash = false;
    ranks[size_t(c->rank)] = me;
    for (int k = 1; k < n && rc == MPI_SUCCESS; ++k) {
      int msg[2] = {-1, -1};  // {nccl rank, world rank}
      rc = MPI_Recv(msg, 2, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      senders.push_back(msg[1]);
      if (msg[0] < 0 || msg[0] >= n || ranks[size_t(msg[0])] != -1)
        clash = true;
      else
        ranks[size_t(msg[0])] = msg[1];
    }
    if (clash) std::fill(ranks.begin(), ranks.end(), -1);
    for (size_t k = 0; k < senders.size() && rc == MPI_SUCCESS; ++k)
      rc = MPI_Send(ranks.data(), n, MPI_INT, senders[k], tag, MPI_COMM_WORLD);
  } else {
    int msg[2] = {c->rank, me};
    rc = MPI_Send(msg, 2, MPI_INT, creator, tag, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) rc = MPI_Recv(ranks.data(), n, MPI_INT, creator, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (rc != MPI_SUCCESS)
    return fail(ncclSystemError,
                cat("ncclCommInitRank: rendezvous with world rank ", creator, " failed (MPI error ", rc, ")"));
  if (ranks[0] == -1)
    return fail(ncclInvalidUsage, "ncclCommInitRank: two callers gave the same rank (or one out of range)");
  MPI_Group world, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  rc = MPI_Group_incl(world, n, ranks.data(), &group);
  MPI_Group_free(&world);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &c->mpi);
    MPI_Group_free(&group);
  }
  int got = -1;
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(c->mpi, &got);
  if (rc != MPI_SUCCESS || got != c->rank)
    return fail(ncclSystemError, cat("ncclCommInitRank: MPI_Comm_create_group failed (MPI error ", rc, ", rank ", got,
                                     " for nccl rank ", c->rank, ")"));
  MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);  // errors become return codes, then async errors
  return ncclSuccess;
}
#endif

// What one ncclGroupEnd launches, in stream order: every send and receive
// posted (MPI_Isend/Irecv in chunks; a rank's sends to itself copied into
// its receives from itself, in order), then the group's collectives in order
// (MPI progresses the posted ops meanwhile), then the wait for them all.
void run_group(const std::vector<P2p>& ops, const std::vector<std::function<void()>>& calls) {
  std::vector<const P2p*> to_self, from_self;
  for (const P2p& op : ops)
    if (op.peer == op.comm->rank) (op.send ? to_self : from_self).push_back(&op);
  for (size_t i = 0; i < to_self.size() && i < from_self.size(); ++i) {
    if (to_self[i]->bytes != from_self[i]->bytes || to_self[i]->comm != from_self[i]->comm)
      return async_fail(to_self[i]->comm,
                        cat("a send of ", to_self[i]->bytes, " bytes to self met a recv of ", from_self[i]->bytes));
    std::memmove(from_self[i]->buf, to_self[i]->buf, to_self[i]->bytes);
  }
  if (to_self.size() != from_self.size())
    return async_fail(ops.front().comm,
                      cat(to_self.size(), " send(s) to self and ", from_self.size(), " recv(s) in one group"));
#if ENGINE_HAVE_MPI
  std::vector<MPI_Request> reqs;
  for (const P2p& op : ops) {
    if (op.peer == op.comm->rank) continue;
    for (size_t at = 0; at < op.bytes; at += kMaxChunk) {
      const int k = int(std::min(kMaxChunk, op.bytes - at));
      char* p = static_cast<char*>(op.buf) + at;
      MPI_Request r;
      const int rc = op.send ? MPI_Isend(p, k, MPI_BYTE, op.peer, 0, op.comm->mpi, &r)
                             : MPI_Irecv(p, k, MPI_BYTE, op.peer, 0, op.comm->mpi, &r);
      if (rc != MPI_SUCCESS)
        return async_fail(op.comm, cat(op.send ? "MPI_Isend" : "MPI_Irecv", " failed (MPI error ", rc, ")"));
      reqs.push_back(r);
    }
  }
#endif
  for (const auto& call : calls) call();
#if ENGINE_HAVE_MPI
  if (reqs.empty()) return;
  if (int rc = MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE))
    return async_fail(ops.front().comm,
                      cat("MPI_Waitall of ", reqs.size(), " sends and receives failed (MPI error ", rc, ")"));
#endif
}

// One send or receive: now (in stream order), or with the group's others at its ncclGroupEnd.
ncclResult_t p2p(const char* call, ncclComm_t comm, bool send, const void* buf, size_t count, ncclDataType_t t,
                 int peer) {
  if (ncclResult_t rc = check_call(call, comm, t, nullptr)) return rc;
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, cat(call, ": peer ", peer, " of ", comm->nranks, " ranks"));
  if (count == 0) return ncclSuccess;
  if (ncclResult_t rc = check_buffer(call, send ? "sendbuff" : "recvbuff", buf, 1, count, "count", t)) return rc;
  const P2p op{comm, send, const_cast<void*>(buf), count * elem_size(t), peer};
  if (peer == comm->rank && t_group_depth == 0)  // to itself: only within a group, where its recv meets it
    return fail(ncclInvalidUsage, cat(call, ": to its own rank outside ncclGroupStart/End would wait forever"));
  if (t_group_depth > 0) {
    t_p2p.push_back(op);
    return ncclSuccess;
  }
  return submit(comm, [op] { run_group({op}, {}); });
}

}  // namespace

// The look-alike follows NCCL 2.28's API; 22800 says so (real 2.28.x reports 228xx).
ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is null");
  *version = 22800;
  return ncclSuccess;
}

// The id holds a magic, its creator's world rank (where the others
// rendezvous) and a per-process counter (so successive ids differ).
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is null");
  int creator = 0;
#if ENGINE_HAVE_MPI
  if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &creator);
#endif
  const int counter = g_id_counter++;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kMagic, 8);
  std::memcpy(id->internal + 8, &creator, sizeof(int));
  std::memcpy(id->internal + 12, &counter, sizeof(int));
  return ncclSuccess;
}

// Collective over the nranks callers that pass the same id, each its own rank.
ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (!out) return fail(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, cat("ncclCommInitRank: rank ", rank, " of ", nranks));
  if (std::memcmp(id.internal, kMagic, 8) != 0)
    return fail(ncclInvalidArgument, "ncclCommInitRank: the id does not come from ncclGetUniqueId");
  auto* c = new ncclComm;
  c->nranks = nranks, c->rank = rank;
  if (nranks > 1) {
#if ENGINE_HAVE_MPI
    ncclResult_t rc = ncclSystemError;
    if (!mpi_running()) {
      fail(rc, "ncclCommInitRank: more than one rank needs MPI, and MPI is not initialised (run under mpirun)");
    } else {
      int creator = 0, counter = 0;
      std::memcpy(&creator, id.internal + 8, sizeof(int));
      std::memcpy(&counter, id.internal + 12, sizeof(int));
      rc = rendezvous(c, creator, 7000 + counter % 1000);
    }
#else
    const ncclResult_t rc = fail(ncclSystemError, "ncclCommInitRank: more than one rank, and built without MPI");
#endif
    if (rc != ncclSuccess) {
      ncclCommDestroy(c);
      return rc;
    }
  }
  *out = c;
  return ncclSuccess;
}

// Frees the MPI communicator (a local operation in Open MPI and MPICH, so
// it cannot hang on a dead peer) unless MPI is already finalised.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
#if ENGINE_HAVE_MPI
  if (comm->mpi != MPI_COMM_NULL && mpi_running()) MPI_Comm_free(&comm->mpi);
#endif
  delete comm;
  return ncclSuccess;
}

// NCCL's abort returns without waiting for pending work; here every call
// has run to completion in stream order, so nothing is pending: destroy.
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async) {
  if (!comm || !async) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is null");
  *async = comm->async;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !count) return fail(ncclInvalidArgument, "ncclCommCount: comm or count is null");
  *count = comm->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return fail(ncclInvalidArgument, "ncclCommUserRank: comm or rank is null");
  *rank = comm->rank;
  return ncclSuccess;
}

// NCCL's strings, pointing at ncclGetLastError where it has the details.
const char* ncclGetErrorString(ncclResult_t r) {
  static const char* strings[] = {"no error",
                                  "unhandled cuda error",
                                  "unhandled system error (see ncclGetLastError)",
                                  "internal error",
                                  "invalid argument (see ncclGetLastError)",
                                  "invalid usage (see ncclGetLastError)",
                                  "remote process exited or there was a network error",
                                  "NCCL operation in progress"};
  return unsigned(r) < 8 ? strings[r] : "unknown result code";
}

// As in NCCL, the last error of the calling thread; comm is unused.
const char* ncclGetLastError(ncclComm_t) { return t_last.c_str(); }

// recv[i] = sum over ranks of send[i] (ncclAvg: / nranks); in place when send == recv.
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  const char* call = "ncclAllReduce";
  if (ncclResult_t rc = check_call(call, comm, t, &op)) return rc;
  if (count == 0) return ncclSuccess;
  if (ncclResult_t rc = check_buffer(call, "sendbuff", send, 1, count, "count", t)) return rc;
  if (ncclResult_t rc = check_buffer(call, "recvbuff", recv, 1, count, "count", t)) return rc;
  return submit(comm, [=] { reduce(comm, send, count, t, op, recv, 0, count); });
}

// send holds nranks blocks of recvcount; rank r gets the reduction of block r.
// In place when recv == send + rank * recvcount elements.
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t) {
  const char* call = "ncclReduceScatter";
  if (ncclResult_t rc = check_call(call, comm, t, &op)) return rc;
  if (n == 0) return ncclSuccess;
  if (ncclResult_t rc = check_buffer(call, "sendbuff", send, comm->nranks, n, "recvcount", t)) return rc;
  if (ncclResult_t rc = check_buffer(call, "recvbuff", recv, 1, n, "recvcount", t)) return rc;
  // The whole buffer is all-reduced and each rank keeps its block: simple, not bandwidth-optimal.
  return submit(comm, [=] { reduce(comm, send, n * size_t(comm->nranks), t, op, recv, n * size_t(comm->rank), n); });
}

// recv holds nranks blocks of sendcount, block r from rank r. In place when
// send == recv + rank * sendcount elements.
ncclResult_t ncclAllGather(const void* send, void* recv, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t) {
  const char* call = "ncclAllGather";
  if (ncclResult_t rc = check_call(call, comm, t, nullptr)) return rc;
  if (n == 0) return ncclSuccess;
  if (ncclResult_t rc = check_buffer(call, "sendbuff", send, 1, n, "sendcount", t)) return rc;
  if (ncclResult_t rc = check_buffer(call, "recvbuff", recv, comm->nranks, n, "sendcount", t)) return rc;
  // Own block into place first, then one broadcast per block: every form, in place or not, is the same code.
  return submit(comm, [=] {
    const size_t bytes = n * elem_size(t);
    char* blocks = static_cast<char*>(recv);
    if (send != blocks + size_t(comm->rank) * bytes) std::memmove(blocks + size_t(comm->rank) * bytes, send, bytes);
    for (int r = 0; r < comm->nranks; ++r) bcast_bytes(comm, blocks + size_t(r) * bytes, bytes, r);
  });
}

// root's send to every rank's recv; in place when send == recv; other ranks' send is ignored.
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t) {
  const char* call = "ncclBroadcast";
  if (ncclResult_t rc = check_call(call, comm, t, nullptr)) return rc;
  if (root < 0 || root >= comm->nranks)
    return fail(ncclInvalidArgument, cat(call, ": root ", root, " of ", comm->nranks, " ranks"));
  if (count == 0) return ncclSuccess;
  if (comm->rank == root)
    if (ncclResult_t rc = check_buffer(call, "sendbuff", send, 1, count, "count", t)) return rc;
  if (ncclResult_t rc = check_buffer(call, "recvbuff", recv, 1, count, "count", t)) return rc;
  return submit(comm, [=] {
    const size_t bytes = count * elem_size(t);
    if (comm->rank == root && send != recv) std::memmove(recv, send, bytes);
    bcast_bytes(comm, recv, bytes, root);
  });
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  return p2p("ncclSend", comm, true, send, count, t, peer);
}
ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t) {
  return p2p("ncclRecv", comm, false, recv, count, t, peer);
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

// Only the outermost End issues the group's calls, in the order they were made.
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<std::function<void()>> calls;
  calls.swap(t_deferred);
  std::vector<P2p> ops;
  ops.swap(t_p2p);
  if (ops.empty()) {
    for (auto& call : calls) emu::enqueue(std::move(call));
    return ncclSuccess;
  }
  // With sends or receives: one piece of stream-ordered work (run_group).
  emu::enqueue([ops = std::move(ops), calls = std::move(calls)] {
    try {
      run_group(ops, calls);
    } catch (const std::exception& e) {  // never escapes into the emulator
      async_fail(ops.front().comm, e.what());
    }
  });
  return ncclSuccess;
}

}  // namespace emu_nccl
