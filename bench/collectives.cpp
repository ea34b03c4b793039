// bench/collectives: time each collective of the Communicator over a range
// of sizes, as nccl-tests does, on whatever backend the device uses.
//   bash scripts/mpirun.sh -np 2 ./build/bench/collectives [--device cpu] [--comm auto] [--max_mb 64]
// Per size: time per call (the slowest rank's mean), algbw = bytes / time,
// and busbw, the bandwidth each link carries in a ring (nccl-tests'
// PERFORMANCE.md), which is comparable across rank counts:
//   all_reduce       busbw = algbw * 2(n-1)/n
//   reduce_scatter   busbw = algbw * (n-1)/n   (bytes: the whole input, n x output)
//   all_gather       busbw = algbw * (n-1)/n   (bytes: the whole output)
//   broadcast        busbw = algbw
// and, for scale, this machine's memcpy bandwidth at the largest size (one
// thread): on one node MPI moves data through shared memory, so busbw is
// bounded by copies.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/communicator.h"
#include "comm/world.h"

using namespace eng;
using namespace eng::comm;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string device = "cpu", comm = "auto";
  double max_mb = 64;
  int64_t min_bytes = 8;
  int iters = 0;  // 0: as many as about 200 MB of traffic, 3..200
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      ENGINE_CHECK(i + 1 < argc, "collectives: ", k, " needs a value");
      return argv[++i];
    };
    if (k == "--device")
      a.device = next();
    else if (k == "--comm")
      a.comm = next();
    else if (k == "--max_mb")
      a.max_mb = std::stod(next());
    else if (k == "--min_bytes")
      a.min_bytes = std::stoll(next());
    else if (k == "--iters")
      a.iters = std::stoi(next());
    else if (k == "--help") {
      std::printf(
          "usage: [mpirun -np N] collectives [--device cpu|emu|cuda] [--comm auto|mpi|nccl] "
          "[--max_mb 64] [--min_bytes 8] [--iters N]\n");
      std::exit(0);
    } else
      ENGINE_FAIL("collectives: unknown option ", k, " (see --help)");
  }
  return a;
}

// Mean seconds per call of `fn` (after a warm-up), the slowest rank's.
template <typename F>
double time_it(F fn, int64_t bytes, Device dev, int fixed_iters) {
  for (int w = 0; w < 2; ++w) fn();
  const int iters = fixed_iters > 0
                        ? fixed_iters
                        : int(std::clamp<int64_t>(int64_t(2e8 / double(std::max<int64_t>(bytes, 1))), 3, 200));
  barrier_world();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) fn();
  if (dev.type == DeviceType::cuda) (void)Tensor::zeros({1}, DType::f32, dev).to_vector();  // drain the stream
  const double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  return all_reduce_host(s, HostOp::max);
}

int run(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const World& w = init_world();
  const Device dev = Device::parse(a.device);
  const Backend b = parse_backend(a.comm, dev);
  const Group g = Group::world_group();
  auto comm = make_communicator(g, dev, b);
  const int n = g.size();
  if (w.rank == 0)
    std::printf("collectives: %d ranks on %s, %s backend (fp32)\n%10s %-15s %12s %12s %12s\n", n, dev.str().c_str(),
                backend_name(b), "bytes", "op", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
  const int64_t max_bytes = int64_t(a.max_mb * 1048576.0);
  for (int64_t bytes = a.min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int64_t count = std::max<int64_t>(bytes / 4 / n * n, n);  // a multiple of n (reduce_scatter)
    const double nb = double(count) * 4;
    Tensor full = Tensor::full({count}, 1.0, DType::f32, dev), part = Tensor::full({count / n}, 1.0, DType::f32, dev);
    struct Row {
      const char* op;
      double factor;  // busbw / algbw
      std::function<void()> fn;
    };
    const std::vector<Row> rows = {
        {"all_reduce", 2.0 * (n - 1) / n, [&] { comm->all_reduce(full, ReduceOp::sum).wait(); }},
        {"reduce_scatter", double(n - 1) / n, [&] { comm->reduce_scatter(full, part, ReduceOp::sum).wait(); }},
        {"all_gather", double(n - 1) / n, [&] { comm->all_gather(part, full).wait(); }},
        {"broadcast", 1.0, [&] { comm->broadcast(full, 0).wait(); }},
    };
    for (const Row& r : rows) {
      const double t = time_it(r.fn, int64_t(nb), dev, a.iters);
      if (w.rank == 0)
        std::printf("%10lld %-15s %12.1f %12.3f %12.3f\n", (long long)nb, r.op, t * 1e6, nb / t / 1e9,
                    nb / t / 1e9 * r.factor);
    }
  }
  if (w.rank == 0) {
    // memcpy between two host buffers of the largest size, best of 5.
    std::vector<char> src(static_cast<size_t>(max_bytes), 1), dst(static_cast<size_t>(max_bytes));
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      std::memcpy(dst.data(), src.data(), src.size());
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("memcpy %lld bytes (one thread): %.3f GB/s\n", (long long)max_bytes, double(max_bytes) / best / 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int rc = run(argc, argv);
    finalize_world();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: collectives: error: %s\n", world().rank, e.what());
    abort_world(1);
  }
}
