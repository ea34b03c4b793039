// An NCCL look-alike for the `emu` device: the subset of NCCL 2.28's API that
// comm/nccl_backend.inc calls, with NCCL's names, values and argument
// semantics (counts in elements, in-place forms, group calls), implemented
// over MPI on host memory. nccl_backend.inc is compiled once against the
// real <nccl.h> (cuda) and once against this header (emu), so CI runs the
// very lines that call NCCL, under mpirun -np 1..4, without a GPU.
// Covered: unique id + CommInitRank (a rendezvous over MPI_COMM_WORLD),
// AllReduce, ReduceScatter, AllGather, Broadcast, Send/Recv (point-to-point,
// matched per pair in issue order), GroupStart/End (deferred to the
// outermost End, whose sends and receives are all posted before any is
// waited for, so a group's exchange never deadlocks), async-error query,
// last error, abort, destroy.
// Reductions: ncclSum on f32, f64, i32, u32, i64, u64 natively and on
// f16/bf16 in fp32, rounded once; ncclAvg (sum / nranks) on the float
// types; ncclMax on all of these; 8-bit types are moved (gather, broadcast), not reduced.
// Stricter than NCCL: every buffer must lie inside one live emu allocation
// of the size the count implies, so a count in bytes is caught, not an
// overrun (ncclInvalidArgument, with the sizes in ncclGetLastError).
// Not covered: ncclProd/Min and ncclAvg on integers (ncclInvalidArgument
// with a last-error message), fp8, split, config, user buffers.
// Each collective runs through emu::enqueue, i.e. in the emulator's stream
// order (the stream argument is ignored: the emulator has one stream), so an
// emulated CUDA graph captures and replays it.
#pragma once
#include <cstddef>

struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;  // token-identical to the CUDA toolkit's

#ifndef NCCL_UNIQUE_ID_BYTES
#define NCCL_UNIQUE_ID_BYTES 128
#endif

namespace emu_nccl {

typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct ncclComm* ncclComm_t;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

}  // namespace emu_nccl
