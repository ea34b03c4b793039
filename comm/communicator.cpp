// Argument checks shared by both backends, the group-of-one short cut, and
// the backend choice.
#include "comm/communicator.h"

#include <cstring>

#include "base/error.h"
#include "comm/backends.h"
#include "comm/watchdog.h"
#include "comm/world.h"
#include "engine/graph.h"

namespace eng::comm {

const char* backend_name(Backend b) { return b == Backend::mpi ? "mpi" : "nccl"; }

Backend parse_backend(const std::string& s, Device dev) {
  if (s == "auto") return dev.type == DeviceType::cuda ? Backend::nccl : Backend::mpi;
  if (s == "mpi") return Backend::mpi;
  if (s == "nccl") return Backend::nccl;
  ENGINE_USER_FAIL("unknown comm backend '", s, "' (expected auto, mpi or nccl)");
}

bool nccl_built() { return ENGINE_HAVE_NCCL != 0; }

namespace {
// A collective the watchdog knows about until it completes.
struct TrackedWork : WorkImpl {
  Work inner;
  uint64_t id;
  bool ended = false;
  TrackedWork(Work w, uint64_t i) : inner(std::move(w)), id(i) {}
  ~TrackedWork() override { end(); }
  void end() {
    if (!ended) op_end(id);
    ended = true;
  }
  bool test() override {
    if (!inner.test()) return false;
    end();
    return true;
  }
  void wait() override {
    inner.wait();
    end();
  }
};

// A group of one with the short cut on: the base class answers every call.
class LocalCommunicator : public Communicator {
 public:
  using Communicator::Communicator;
  Backend backend() const override { return Backend::nccl; }

 protected:
  Work all_reduce_raw(const void*, void*, size_t, DType, ReduceOp) override { unreachable(); }
  Work reduce_scatter_raw(const void*, void*, size_t, DType, ReduceOp) override { unreachable(); }
  Work all_gather_raw(const void*, void*, size_t, DType) override { unreachable(); }
  Work broadcast_raw(void*, size_t, DType, int) override { unreachable(); }
  void barrier_raw() override { unreachable(); }
  Work p2p_raw(const std::vector<RawP2p>&) override { unreachable(); }

 private:
  [[noreturn]] static void unreachable() { ENGINE_FAIL("comm: a group of one reached a backend"); }
};
}  // namespace

std::unique_ptr<Communicator> make_local_communicator(const Group& g, Device dev, CommOptions o) {
  return std::make_unique<LocalCommunicator>(g, dev, o);
}

std::unique_ptr<Communicator> make_communicator(const Group& g, Device dev, Backend b, CommOptions o) {
  if (b == Backend::mpi) {
    ENGINE_CHECK(dev.type != DeviceType::cuda, "comm: the mpi backend works on cpu and emu memory; ", dev.str(),
                 " needs --comm nccl");
    return make_mpi_communicator(g, dev, o);
  }
  ENGINE_CHECK(dev.type != DeviceType::cpu, "comm: the nccl backend needs a GPU device (cuda, or emu for its ",
               "look-alike); cpu uses --comm mpi");
  if (dev.type == DeviceType::emu) return make_nccl_emu_communicator(g, dev, o);
  if (!nccl_built()) {
    // One rank needs no NCCL: its collectives never reach a backend.
    ENGINE_CHECK(g.size() == 1 && o.short_circuit, "comm: ", dev.str(), " on ", g.size(),
                 " ranks needs NCCL, and this build found no libnccl (install NCCL and rebuild)");
    return make_local_communicator(g, dev, o);
  }
  return make_nccl_real_communicator(g, dev, o);
}

Work Communicator::tracked(const char* op, size_t count, DType dt, const std::function<Work()>& issue) {
  const uint64_t seq = ops_issued() + 1;
  maybe_stall(seq);
  const std::string& label = op_label();
  const uint64_t id = op_begin(cat(op, " #", seq, " on group ", group_.name(), " (", size(), " ranks, ", count, " x ",
                                   dtype_name(dt), label.empty() ? "" : ", ", label, ")"));
  return Work(std::make_shared<TrackedWork>(issue(), id));
}

void Communicator::check(const char* op, const Tensor& t, const char* what) const {
  ENGINE_CHECK(t.defined(), "comm ", op, ": ", what, " is undefined");
  ENGINE_CHECK(t.device() == dev_, "comm ", op, " (group ", group_.name(), " on ", dev_.str(), "): ", what, " is ",
               t.desc());
  const DType d = t.dtype();
  // Bytes (8-bit optimizer state) only move: nothing sums them.
  const std::string o = op;
  const bool moves = o == "all_gather" || o == "broadcast" || o == "send" || o == "recv";
  ENGINE_CHECK(d == DType::f32 || d == DType::f64 || d == DType::bf16 || d == DType::f16 || d == DType::i32 ||
                   (moves && d == DType::u8),
               "comm ", op, ": ", what, " has dtype ", dtype_name(d),
               moves ? " (f32, f64, bf16, f16, i32 or u8)" : " (f32, f64, bf16, f16 or i32)");
}

Work Communicator::local_copy(const Tensor& in, Tensor& out) const {
  if (in.data_ptr() != out.data_ptr()) copy_within(dev_, out.data_ptr(), in.data_ptr(), in.nbytes());
  return Work();
}

Work Communicator::all_reduce(const Tensor& in, Tensor& out, ReduceOp op) {
  check("all_reduce", in, "input");
  check("all_reduce", out, "output");
  ENGINE_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel(), "comm all_reduce: input ", in.desc(),
               " and output ", out.desc(), " differ");
  ENGINE_CHECK(op != ReduceOp::avg || in.dtype() != DType::i32, "comm all_reduce: avg of i32 (use sum)");
  if (size() == 1 && opt_.short_circuit) return local_copy(in, out);
  static const char* const kNames[] = {"all_reduce sum", "all_reduce avg", "all_reduce max"};
  bytes_sent_ += 2.0 * double(in.nbytes()) * double(size() - 1) / double(size());
  return tracked(kNames[int(op)], size_t(in.numel()), in.dtype(),
                 [&] { return all_reduce_raw(in.data_ptr(), out.data_ptr(), size_t(in.numel()), in.dtype(), op); });
}

Work Communicator::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  check("reduce_scatter", in, "input");
  check("reduce_scatter", out, "output");
  ENGINE_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size(), "comm reduce_scatter over ", size(),
               " ranks: input ", in.desc(), " must hold ", size(), " x the output's ", out.numel(),
               " elements of its dtype (pad it to a multiple of ", size(), ")");
  ENGINE_CHECK(op != ReduceOp::avg || in.dtype() != DType::i32, "comm reduce_scatter: avg of i32 (use sum)");
  if (size() == 1 && opt_.short_circuit) return local_copy(in, out);
  bytes_sent_ += double(in.nbytes()) * double(size() - 1) / double(size());
  return tracked("reduce_scatter", size_t(in.numel()), in.dtype(), [&] {
    return reduce_scatter_raw(in.data_ptr(), out.data_ptr(), size_t(out.numel()), in.dtype(), op);
  });
}

Work Communicator::all_gather(const Tensor& in, Tensor& out) {
  check("all_gather", in, "input");
  check("all_gather", out, "output");
  ENGINE_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size(), "comm all_gather over ", size(),
               " ranks: output ", out.desc(), " must hold ", size(), " x the input's ", in.numel(), " elements");
  if (size() == 1 && opt_.short_circuit) return local_copy(in, out);
  bytes_sent_ += double(out.nbytes()) * double(size() - 1) / double(size());
  return tracked("all_gather", size_t(out.numel()), in.dtype(),
                 [&] { return all_gather_raw(in.data_ptr(), out.data_ptr(), size_t(in.numel()), in.dtype()); });
}

Work Communicator::broadcast(Tensor& t, int root) {
  check("broadcast", t, "tensor");
  ENGINE_CHECK(root >= 0 && root < size(), "comm broadcast: root ", root, " outside group ", group_.name(), " of ",
               size(), " ranks");
  if (size() == 1 && opt_.short_circuit) return Work();
  bytes_sent_ += double(t.nbytes());
  return tracked("broadcast", size_t(t.numel()), t.dtype(),
                 [&] { return broadcast_raw(t.data_ptr(), size_t(t.numel()), t.dtype(), root); });
}

Work Communicator::send_recv(const std::vector<P2pOp>& ops) {
  std::vector<RawP2p> raw;
  std::vector<const Tensor*> to_self, from_self;
  std::string what;  // "send to 1, recv from 0": the watchdog's description
  double bytes = 0;
  size_t count = 0;
  for (const P2pOp& op : ops) {
    const bool send = op.kind == P2pOp::send;
    const char* name = send ? "send" : "recv";
    check(name, op.tensor, "tensor");
    ENGINE_CHECK(op.peer >= 0 && op.peer < size(), "comm ", name, ": peer ", op.peer, " outside group ", group_.name(),
                 " of ", size(), " ranks");
    what += cat(what.empty() ? "" : ", ", name, send ? " to " : " from ", op.peer);
    if (op.peer == rank()) {
      (send ? to_self : from_self).push_back(&op.tensor);
      continue;
    }
    raw.push_back({send, op.tensor.data_ptr(), size_t(op.tensor.numel()), op.tensor.dtype(), op.peer});
    if (send) bytes += double(op.tensor.nbytes());
    count += size_t(op.tensor.numel());
  }
  // To itself: the sends copied into the receives, in order.
  ENGINE_CHECK(to_self.size() == from_self.size(), "comm send_recv on group ", group_.name(), ": ", to_self.size(),
               " send(s) to this rank (", rank(), ") and ", from_self.size(), " recv(s) from it");
  for (size_t i = 0; i < to_self.size(); ++i) {
    ENGINE_CHECK(to_self[i]->dtype() == from_self[i]->dtype() && to_self[i]->numel() == from_self[i]->numel(),
                 "comm send_recv to self: sent ", to_self[i]->desc(), ", received into ", from_self[i]->desc());
    copy_within(dev_, from_self[i]->data_ptr(), to_self[i]->data_ptr(), to_self[i]->nbytes());
  }
  if (raw.empty()) return Work();
  bytes_sent_ += bytes;
  return tracked(what.c_str(), count, raw.front().dt, [&] { return p2p_raw(raw); });
}

void Communicator::barrier() {
  if (size() == 1 && opt_.short_circuit) return;
  tracked("barrier", 0, DType::i32, [&] {
    barrier_raw();
    return Work();
  }).wait();
}

}  // namespace eng::comm
