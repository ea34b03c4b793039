// Collectives on device tensors over a group, behind one interface with two
// backends (the NCCL names and semantics, which PyTorch's ProcessGroup keeps too):
//   nccl: NCCL on `cuda`, on a communication stream of its own; on `emu` the
//         same source runs against the NCCL look-alike (comm/nccl_emu), so CI
//         executes it without a GPU.
//   mpi:  non-blocking MPI collectives (MPI_Iallreduce, ...) on `cpu`, so
//         communication overlaps compute; on `emu` in the emulator's stream order.
// Every collective returns a Work: the caller must wait() before touching the
// output (cpu: blocks; cuda: the current stream waits on the comm stream).
// In-place forms follow NCCL: all_reduce and broadcast with in == out;
// reduce_scatter with out == in's slice [rank*n, (rank+1)*n); all_gather with
// in == out's slice [rank*n, (rank+1)*n). A group of one does no
// communication at all (a copy when out of place).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/group.h"
#include "engine/tensor.h"

namespace eng::comm {

// max: exact in any dtype (no rounding), used by the vocab-parallel softmax.
enum class ReduceOp { sum, avg, max };
enum class Backend { mpi, nccl };
const char* backend_name(Backend b);
// "auto" picks nccl on cuda, mpi on cpu and emu; "nccl" on emu is the look-alike.
Backend parse_backend(const std::string& s, Device dev);
bool nccl_built();  // the real NCCL (CUDA builds that found libnccl)

struct WorkImpl {
  virtual ~WorkImpl() = default;
  virtual bool test() = 0;  // complete? (also drives MPI's progress)
  virtual void wait() = 0;
};

class Work {
 public:
  Work() = default;  // already complete
  explicit Work(std::shared_ptr<WorkImpl> impl) : impl_(std::move(impl)) {}
  bool test() { return !impl_ || impl_->test(); }
  void wait() {
    if (impl_) impl_->wait();
  }

 private:
  std::shared_ptr<WorkImpl> impl_;
};

struct CommOptions {
  bool short_circuit = true;           // a group of one skips the backend (tests turn it off)
  size_t max_chunk = size_t(1) << 30;  // mpi: elements per MPI call (counts are int; tests make it small)
};

class Communicator {
 public:
  Communicator(const Group& g, Device dev, CommOptions o) : group_(g), dev_(dev), opt_(o) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual Backend backend() const = 0;

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  const Group& group() const { return group_; }
  Device device() const { return dev_; }

  Work all_reduce(Tensor& t, ReduceOp op) { return all_reduce(t, t, op); }
  Work all_reduce(const Tensor& in, Tensor& out, ReduceOp op);
  Work reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op);  // in: size x n elements, out: n
  Work all_gather(const Tensor& in, Tensor& out);                   // in: n, out: size x n
  Work broadcast(Tensor& t, int root);
  void barrier();
  // Point-to-point. A lone send may wait for the peer's recv (NCCL's does),
  // so two ranks that exchange must issue both sides together: send_recv
  // issues every op of the list at once (ncclGroupStart/End of ncclSend and
  // ncclRecv; MPI_Isend/Irecv), like PyTorch's batch_isend_irecv, and its
  // Work covers them all.
  struct P2pOp {
    enum Kind : uint8_t { send, recv } kind;
    Tensor tensor;  // recv: written in place
    int peer;
  };
  Work send(const Tensor& t, int peer) { return send_recv({{P2pOp::send, t, peer}}); }
  Work recv(Tensor& t, int peer) { return send_recv({{P2pOp::recv, t, peer}}); }
  Work send_recv(const std::vector<P2pOp>& ops);
  // Group calls (ncclGroupStart/End): the collectives issued between them
  // are launched together at group_end(), whose Work covers them all (the
  // ones returned inside the group are complete placeholders on nccl). On
  // mpi every collective runs on its own and group_end() returns nothing to
  // wait for. Groups do not nest across communicators.
  virtual void group_start() {}
  virtual Work group_end() { return Work(); }
  // What this communicator has sent, per rank, under the ring model the
  // figures of docs/distributed.md use: an all-reduce of n bytes sends
  // 2 n (P-1)/P, a reduce-scatter or all-gather of n bytes in all (the
  // input, or the output) n (P-1)/P, a broadcast n. Counted when issued;
  // a group of one sends nothing, nor does the replay of a captured graph.
  // A send of n bytes to another rank counts n.
  double bytes_sent() const { return bytes_sent_; }

 protected:
  // Raw forms: counts in elements, pointers already checked (devices, sizes,
  // dtypes). The caller keeps the tensors alive until the work completes.
  virtual Work all_reduce_raw(const void* in, void* out, size_t count, DType dt, ReduceOp op) = 0;
  virtual Work reduce_scatter_raw(const void* in, void* out, size_t count, DType dt, ReduceOp op) = 0;
  virtual Work all_gather_raw(const void* in, void* out, size_t count, DType dt) = 0;
  virtual Work broadcast_raw(void* buf, size_t count, DType dt, int root) = 0;
  virtual void barrier_raw() = 0;
  // The ops to other ranks (a send to self is copied by the caller), issued together.
  struct RawP2p {
    bool send;
    void* buf;
    size_t count;
    DType dt;
    int peer;
  };
  virtual Work p2p_raw(const std::vector<RawP2p>& ops) = 0;
  const CommOptions& options() const { return opt_; }

 private:
  void check(const char* op, const Tensor& t, const char* what) const;
  // Issues a collective under the watchdog's eye (watchdog.h).
  Work tracked(const char* op, size_t count, DType dt, const std::function<Work()>& issue);
  Work local_copy(const Tensor& in, Tensor& out) const;
  Group group_;
  Device dev_;
  CommOptions opt_;
  double bytes_sent_ = 0;
};

// The communicator for `dev` on group g. Collective over g (NCCL builds its
// communicator from rank 0's unique id, broadcast with MPI).
std::unique_ptr<Communicator> make_communicator(const Group& g, Device dev, Backend b, CommOptions o = {});

}  // namespace eng::comm
