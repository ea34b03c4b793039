// The MPI backend: collectives on cpu and emu memory (both are host memory).
// cpu: non-blocking MPI (MPI_Iallreduce, ...); the Work's test() drives MPI's
//   progress, so a caller that polls (DDP does, from its gradient hooks)
//   overlaps communication with compute.
// emu: the collective runs start to finish inside emu::enqueue, i.e. in the
//   emulator's stream order, so a captured (emulated) CUDA graph replays it.
// Reductions: bf16/f16 are summed in fp32 and rounded once at the end (as
// NCCL accumulates); avg is the sum divided by the group size. MPI counts are
// int, so buffers longer than CommOptions::max_chunk go in several calls.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "base/error.h"
#include "comm/backends.h"
#include "comm/mpi_util.h"
#include "kernels/emu/graph.h"

namespace eng::comm {

namespace {

bool narrow(DType dt) { return dt == DType::bf16 || dt == DType::f16; }

// The MPI type that moves `dt` unchanged (16-bit floats as raw bits).
MPI_Datatype raw_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i32:
      return MPI_INT32_T;
    case DType::u8:
      return MPI_UINT8_T;
    default:
      return MPI_UINT16_T;
  }
}
// The type reductions run in: fp32 for the 16-bit floats.
MPI_Datatype work_type(DType dt) { return narrow(dt) ? MPI_FLOAT : raw_type(dt); }
size_t work_size(DType dt) { return narrow(dt) ? 4 : dtype_size(dt); }
// max is exact in the work type too: 16-bit floats widen and narrow back unchanged.
MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

// n elements of dt -> the work type.
void to_work(const void* src, DType dt, void* dst, size_t n) {
  if (!narrow(dt)) {
    std::memcpy(dst, src, n * dtype_size(dt));
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  float* d = static_cast<float*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = dt == DType::bf16 ? bf16_to_float(s[i]) : f16_to_float(s[i]);
}

// n work elements -> dt, divided by `div` (avg) on the way.
void from_work(const void* src, DType dt, void* dst, size_t n, int div) {
  if (dt == DType::f64) {
    const double* s = static_cast<const double*>(src);
    double* d = static_cast<double*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = div > 1 ? s[i] / double(div) : s[i];
    return;
  }
  if (dt == DType::i32) {
    std::memmove(dst, src, n * 4);
    return;
  }
  const float* s = static_cast<const float*>(src);
  for (size_t i = 0; i < n; ++i) {
    const float v = div > 1 ? s[i] / float(div) : s[i];
    if (dt == DType::f32)
      static_cast<float*>(dst)[i] = v;
    else
      static_cast<uint16_t*>(dst)[i] = dt == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
  }
}

struct MpiWork : WorkImpl {
  std::vector<MPI_Request> reqs;
  std::function<void()> finish;  // after the requests: unpack, average, convert
  bool done = false;
  void complete() {
    done = true;
    if (finish) finish();
    finish = nullptr;  // frees the temporaries
  }
  bool test() override {
    if (done) return true;
    int flag = 1;
    if (!reqs.empty()) MPI_CHECK(MPI_Testall(int(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE));
    if (flag) complete();
    return done;
  }
  void wait() override {
    if (done) return;
    if (!reqs.empty()) MPI_CHECK(MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE));
    complete();
  }
  ~MpiWork() override {  // MPI may still write the buffers: never free them under it
    if (!done && !reqs.empty()) MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  }
};

using Bytes = std::shared_ptr<std::vector<char>>;
Bytes temp(size_t bytes) { return std::make_shared<std::vector<char>>(bytes); }

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(const Group& g, Device dev, CommOptions o) : Communicator(g, dev, o) {
    ENGINE_CHECK(g.handle() || g.size() == 1, "comm: group ", g.name(), " has no MPI communicator");
  }
  Backend backend() const override { return Backend::mpi; }

 protected:
  Work all_reduce_raw(const void* in, void* out, size_t count, DType dt, ReduceOp op) override {
    return run([=, this] { return start_all_reduce(in, out, count, dt, op); });
  }
  Work reduce_scatter_raw(const void* in, void* out, size_t count, DType dt, ReduceOp op) override {
    return run([=, this] { return start_reduce_scatter(in, out, count, dt, op); });
  }
  Work all_gather_raw(const void* in, void* out, size_t count, DType dt) override {
    return run([=, this] { return start_all_gather(in, out, count, dt); });
  }
  Work broadcast_raw(void* buf, size_t count, DType dt, int root) override {
    return run([=, this] { return start_broadcast(buf, count, dt, root); });
  }
  void barrier_raw() override {
    if (comm() != MPI_COMM_NULL) MPI_CHECK(MPI_Barrier(comm()));
  }
  Work p2p_raw(const std::vector<RawP2p>& ops) override {
    return run([=, this] { return start_p2p(ops); });
  }

 private:
  MPI_Comm comm() const { return group().handle() ? group().handle()->comm : MPI_COMM_NULL; }
  size_t chunk() const { return std::max<size_t>(1, std::min<size_t>(options().max_chunk, size_t(INT32_MAX))); }

  // cpu: start now, the caller waits. emu: start and finish in stream order.
  Work run(std::function<std::shared_ptr<MpiWork>()> start) {
    if (device().type == DeviceType::cpu) return Work(start());
    emu::enqueue([start] { start()->wait(); });
    return Work();
  }

  std::shared_ptr<MpiWork> start_all_reduce(const void* in, void* out, size_t count, DType dt, ReduceOp op) {
    auto w = std::make_shared<MpiWork>();
    const int div = op == ReduceOp::avg ? size() : 1;
    const size_t ws = work_size(dt);
    // Reduce in `buf` (the output itself when no conversion is needed).
    Bytes tmp;
    char* buf = static_cast<char*>(out);
    const void* src = in;
    if (narrow(dt)) {
      tmp = temp(count * ws);
      to_work(in, dt, tmp->data(), count);
      buf = tmp->data(), src = buf;
    }
    for (size_t off = 0; off < count; off += chunk()) {
      const int n = int(std::min(chunk(), count - off));
      MPI_Request r;
      const void* s = src == buf ? MPI_IN_PLACE : static_cast<const char*>(src) + off * ws;
      if (comm() == MPI_COMM_NULL) {
        if (s != MPI_IN_PLACE) std::memcpy(buf + off * ws, s, size_t(n) * ws);
        continue;
      }
      MPI_CHECK(MPI_Iallreduce(s, buf + off * ws, n, work_type(dt), mpi_op(op), comm(), &r));
      w->reqs.push_back(r);
    }
    if (narrow(dt) || div > 1)
      w->finish = [=] {
        from_work(buf, dt, out, count, div);
        (void)tmp;
      };
    return w;
  }

  std::shared_ptr<MpiWork> start_reduce_scatter(const void* in, void* out, size_t n, DType dt, ReduceOp op) {
    auto w = std::make_shared<MpiWork>();
    const int P = size(), div = op == ReduceOp::avg ? P : 1;
    const size_t es = dtype_size(dt), ws = work_size(dt);
    const char* src = static_cast<const char*>(in);
    const bool in_place = static_cast<const char*>(out) == src + size_t(rank()) * n * es;
    if (!narrow(dt) && !in_place && n <= chunk() && comm() != MPI_COMM_NULL) {
      MPI_Request r;
      MPI_CHECK(MPI_Ireduce_scatter_block(in, out, int(n), raw_type(dt), mpi_op(op), comm(), &r));
      w->reqs.push_back(r);
      if (div > 1) w->finish = [=] { from_work(out, dt, out, n, div); };
      return w;
    }
    // Chunk c of every rank's block, packed side by side in the work type.
    std::vector<std::pair<Bytes, size_t>> results;  // (reduced chunk, its offset)
    for (size_t off = 0; off < n; off += chunk()) {
      const size_t k = std::min(chunk(), n - off);
      Bytes send = temp(size_t(P) * k * ws), recv = temp(k * ws);
      for (int r = 0; r < P; ++r) to_work(src + (size_t(r) * n + off) * es, dt, send->data() + size_t(r) * k * ws, k);
      if (comm() == MPI_COMM_NULL) {
        std::memcpy(recv->data(), send->data(), k * ws);
      } else {
        MPI_Request q;
        MPI_CHECK(MPI_Ireduce_scatter_block(send->data(), recv->data(), int(k), work_type(dt), mpi_op(op), comm(), &q));
        w->reqs.push_back(q);
      }
      results.emplace_back(recv, off);
      results.emplace_back(send, size_t(-1));  // kept alive until the request completes
    }
    w->finish = [=, this] {
      for (const auto& [buf, off] : results)
        if (off != size_t(-1))
          from_work(buf->data(), dt, static_cast<char*>(out) + off * es, std::min(chunk(), n - off), div);
    };
    return w;
  }

  std::shared_ptr<MpiWork> start_all_gather(const void* in, void* out, size_t n, DType dt) {
    auto w = std::make_shared<MpiWork>();
    const int P = size();
    const size_t es = dtype_size(dt);
    char* dst = static_cast<char*>(out);
    const bool in_place = static_cast<const char*>(in) == dst + size_t(rank()) * n * es;
    if (comm() == MPI_COMM_NULL) {
      if (!in_place) std::memcpy(dst, in, n * es);
      return w;
    }
    if (n <= chunk()) {
      MPI_Request r;
      MPI_CHECK(
          MPI_Iallgather(in_place ? MPI_IN_PLACE : in, int(n), raw_type(dt), out, int(n), raw_type(dt), comm(), &r));
      w->reqs.push_back(r);
      return w;
    }
    std::vector<std::pair<Bytes, size_t>> parts;  // (gathered chunk, its offset)
    for (size_t off = 0; off < n; off += chunk()) {
      const size_t k = std::min(chunk(), n - off);
      Bytes send = temp(k * es), recv = temp(size_t(P) * k * es);
      std::memcpy(send->data(), static_cast<const char*>(in) + off * es, k * es);
      MPI_Request r;
      MPI_CHECK(MPI_Iallgather(send->data(), int(k), raw_type(dt), recv->data(), int(k), raw_type(dt), comm(), &r));
      w->reqs.push_back(r);
      parts.emplace_back(recv, off);
      parts.emplace_back(send, size_t(-1));
    }
    w->finish = [=, this] {
      for (const auto& [buf, off] : parts) {
        if (off == size_t(-1)) continue;
        const size_t k = std::min(chunk(), n - off);
        for (int r = 0; r < P; ++r)
          std::memcpy(dst + (size_t(r) * n + off) * es, buf->data() + size_t(r) * k * es, k * es);
      }
    };
    return w;
  }

  // Every op posted before any is waited for: the exchange of two
  // neighbours cannot deadlock, whatever order each issued its ops in.
  std::shared_ptr<MpiWork> start_p2p(const std::vector<RawP2p>& ops) {
    auto w = std::make_shared<MpiWork>();
    for (const RawP2p& op : ops) {
      const size_t es = dtype_size(op.dt);
      for (size_t off = 0; off < op.count; off += chunk()) {
        const int n = int(std::min(chunk(), op.count - off));
        char* p = static_cast<char*>(op.buf) + off * es;
        MPI_Request r;
        if (op.send)
          MPI_CHECK(MPI_Isend(p, n, raw_type(op.dt), op.peer, 0, comm(), &r));
        else
          MPI_CHECK(MPI_Irecv(p, n, raw_type(op.dt), op.peer, 0, comm(), &r));
        w->reqs.push_back(r);
      }
    }
    return w;
  }

  std::shared_ptr<MpiWork> start_broadcast(void* buf, size_t count, DType dt, int root) {
    auto w = std::make_shared<MpiWork>();
    if (comm() == MPI_COMM_NULL) return w;
    const size_t es = dtype_size(dt);
    for (size_t off = 0; off < count; off += chunk()) {
      MPI_Request r;
      MPI_CHECK(MPI_Ibcast(static_cast<char*>(buf) + off * es, int(std::min(chunk(), count - off)), raw_type(dt), root,
                           comm(), &r));
      w->reqs.push_back(r);
    }
    return w;
  }
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const Group& g, Device dev, CommOptions o) {
  return std::make_unique<MpiCommunicator>(g, dev, o);
}

}  // namespace eng::comm
