// The NCCL look-alike's own contract, called as the NCCL backend calls it:
// element counts, in-place forms, group calls, and the bounds check that
// turns a count given in bytes into ncclInvalidArgument instead of a
// silent overrun.
#include <catch2/catch.hpp>
#include <cstring>

#if ENGINE_HAVE_MPI
#include <mpi.h>
#endif

#include "comm/nccl_emu/nccl.h"
#include "comm/world.h"
#include "engine/tensor.h"

using namespace emu_nccl;
using eng::DType;
using eng::Tensor;

namespace {
const eng::Device kEmu{eng::DeviceType::emu, 0};

// A look-alike communicator over the whole world.
ncclComm_t world_comm() {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (eng::comm::world().rank == 0) CHECK(ncclGetUniqueId(&id) == ncclSuccess);  // CHECK: the others wait below
#if ENGINE_HAVE_MPI
  if (eng::comm::world().size > 1) MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, MPI_COMM_WORLD);
#endif
  ncclComm_t c = nullptr;
  REQUIRE(ncclCommInitRank(&c, eng::comm::world().size, id, eng::comm::world().rank) == ncclSuccess);
  return c;
}
}  // namespace

TEST_CASE("nccl look-alike: a count in bytes instead of elements is refused", "[dist]") {
  ncclComm_t c = world_comm();
  const size_t n = 256;
  Tensor t = Tensor::zeros({int64_t(n)}, DType::f32, kEmu);
  void* p = t.data_ptr();
  // Right: 256 float32 elements.
  CHECK(ncclAllReduce(p, p, n, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  // Wrong: 1024 "elements" (the byte count) would run 3 KiB past the buffer.
  CHECK(ncclAllReduce(p, p, n * sizeof(float), ncclFloat32, ncclSum, c, nullptr) == ncclInvalidArgument);
  CHECK_THAT(std::string(ncclGetLastError(c)), Catch::Contains("bytes"));
  CHECK(ncclBroadcast(p, p, n * sizeof(float), ncclFloat32, 0, c, nullptr) == ncclInvalidArgument);
  const int P = eng::comm::world().size;
  // reduce-scatter's count is per rank: the whole buffer's count is too many.
  CHECK(ncclReduceScatter(p, p, n, ncclFloat32, ncclSum, c, nullptr) == (P == 1 ? ncclSuccess : ncclInvalidArgument));
  // A pointer that is not device (emu) memory at all.
  std::vector<float> host(n);
  CHECK(ncclAllReduce(host.data(), host.data(), n, ncclFloat32, ncclSum, c, nullptr) == ncclInvalidArgument);
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
  CHECK(async == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("nccl look-alike: group calls run at ncclGroupEnd, in call order", "[dist]") {
  ncclComm_t c = world_comm();
  const int P = eng::comm::world().size, me = eng::comm::world().rank;
  Tensor a = Tensor::full({5}, double(me + 1), DType::f32, kEmu);
  Tensor b = Tensor::full({3}, double(2 * (me + 1)), DType::bf16, kEmu);
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclAllReduce(a.data_ptr(), a.data_ptr(), 5, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  CHECK(ncclAllReduce(b.data_ptr(), b.data_ptr(), 3, ncclBfloat16, ncclAvg, c, nullptr) == ncclSuccess);
  CHECK(a.to_vector()[0] == float(me + 1));  // deferred: nothing ran yet
  CHECK(ncclGroupEnd() == ncclSuccess);
  CHECK(a.to_vector()[4] == float(P * (P + 1) / 2));
  CHECK(b.to_vector()[2] == float(P + 1));  // avg of 2, 4, ..., 2P
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  CHECK(ncclAllReduce(a.data_ptr(), a.data_ptr(), 5, ncclFloat32, ncclMax, c, nullptr) == ncclSuccess);
  CHECK(a.to_vector()[1] == float(P * (P + 1) / 2));  // the max of equal sums
  CHECK(ncclAllReduce(a.data_ptr(), a.data_ptr(), 5, ncclFloat32, ncclMin, c, nullptr) == ncclInvalidArgument);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}

TEST_CASE("nccl look-alike: ncclSend and ncclRecv, in a group with a collective, and their checks", "[dist]") {
  ncclComm_t c = world_comm();
  const int P = eng::comm::world().size, me = eng::comm::world().rank;
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  Tensor out = Tensor::full({7}, double(me + 1), DType::f32, kEmu), in = Tensor::zeros({7}, DType::f32, kEmu);
  Tensor sum = Tensor::full({2}, 1.0, DType::f32, kEmu);
  // A ring exchange and an all-reduce in one group (the receive listed first: no deadlock either way).
  CHECK(ncclGroupStart() == ncclSuccess);
  CHECK(ncclRecv(in.data_ptr(), 7, ncclFloat32, prev, c, nullptr) == ncclSuccess);
  CHECK(ncclAllReduce(sum.data_ptr(), sum.data_ptr(), 2, ncclFloat32, ncclSum, c, nullptr) == ncclSuccess);
  CHECK(ncclSend(out.data_ptr(), 7, ncclFloat32, next, c, nullptr) == ncclSuccess);
  CHECK(in.to_vector()[0] == 0.f);  // deferred
  CHECK(ncclGroupEnd() == ncclSuccess);
  CHECK(in.to_vector() == std::vector<float>(7, float(prev + 1)));
  CHECK(sum.to_vector()[1] == float(P));
  // The count in bytes, a peer out of range, and a lone send to itself (it would wait forever) are refused.
  CHECK(ncclSend(out.data_ptr(), 7 * sizeof(float), ncclFloat32, next, c, nullptr) == ncclInvalidArgument);
  CHECK_THAT(std::string(ncclGetLastError(c)), Catch::Contains("bytes"));
  CHECK(ncclRecv(in.data_ptr(), 7, ncclFloat32, P, c, nullptr) == ncclInvalidArgument);
  CHECK(ncclSend(out.data_ptr(), 7, ncclFloat32, me, c, nullptr) == ncclInvalidUsage);
  ncclResult_t async = ncclInternalError;
  CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
  CHECK(async == ncclSuccess);
  CHECK(ncclCommDestroy(c) == ncclSuccess);
}
