// bench/loader: how fast the HDF5 batch loader feeds a training step.
//
// Over one weather directory (prepare_weather writes one; scripts/
// bench_loader.sh a NERSC-like 20-channel year), in one run, side by side:
//   1. the page-cache limit: the files read with 4 MiB preads by 1 and by N
//      threads after a warm-up read (no HDF5, no conversion, best of 3): the
//      rate no reader of these files can beat on this machine;
//   2. our loader, batches/s and MB/s, for 0 (read inside next()), 1 and N
//      workers, over the pread path and the H5Dread path (Debian's HDF5 is
//      the thread-safe build: one global lock, so H5Dread threads take turns);
//   2b. the same without normalising (pread path, 0 and N workers): what
//      normalising on the reader threads costs;
//   3. the data wait of a simulated training step (a busy loop of --step_ms)
//      with 0 vs N workers: the % of the step spent waiting for data.
// h5py + NumPy over the same files and batch shape: scripts/bench_loader.sh
// runs this program and bench/loader_h5py.py one after the other.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "io/loader.h"
#include "io/weather_dataset.h"

using namespace eng;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string dir, stats;
  int64_t batch = 8, batches = 40;
  int workers = 4;
  double step_ms = 50;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Reads every file with `threads` threads, each taking every threads-th 4 MiB
// piece by pread; best of 3 passes after a warm-up pass.
double page_cache_mb_per_s(const std::vector<std::string>& files, int threads) {
  constexpr size_t kPiece = 4 << 20;
  auto pass = [&] {
    std::atomic<int64_t> total{0};
    std::vector<std::thread> pool;
    for (int w = 0; w < threads; ++w)
      pool.emplace_back([&, w] {
        std::vector<char> buf(kPiece);
        for (const std::string& f : files) {
          const int fd = ::open(f.c_str(), O_RDONLY);
          if (fd < 0) continue;
          for (off_t pos = off_t(w) * off_t(kPiece);; pos += off_t(threads) * off_t(kPiece)) {
            const ssize_t got = ::pread(fd, buf.data(), kPiece, pos);
            if (got <= 0) break;
            total += got;
          }
          ::close(fd);
        }
      });
    for (auto& t : pool) t.join();
    return total.load();
  };
  pass();  // warm the page cache
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    const int64_t bytes = pass();
    best = std::max(best, double(bytes) / 1e6 / seconds_since(t0));
  }
  return best;
}

void busy_wait(double ms) {
  const auto t0 = Clock::now();
  while (seconds_since(t0) * 1e3 < ms) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a;
    for (int i = 1; i < argc; ++i) {
      const std::string k = argv[i];
      auto val = [&]() -> std::string {
        ENGINE_CHECK(i + 1 < argc, "loader bench: ", k, " needs a value");
        return argv[++i];
      };
      if (k == "--dir")
        a.dir = val();
      else if (k == "--stats")
        a.stats = val();
      else if (k == "--batch")
        a.batch = std::stoll(val());
      else if (k == "--batches")
        a.batches = std::stoll(val());
      else if (k == "--workers")
        a.workers = std::stoi(val());
      else if (k == "--step_ms")
        a.step_ms = std::stod(val());
      else {
        std::printf(
            "usage: loader --dir DIR --stats FILE [--batch 8] [--batches 40] [--workers 4] [--step_ms 50]\n"
            "DIR holds weather year files (prepare_weather's OUT/train), FILE their stats (OUT/stats.h5).\n");
        return k == "--help" ? 0 : 2;
      }
    }
    ENGINE_CHECK(!a.dir.empty() && !a.stats.empty(), "loader bench: --dir and --stats are required (see --help)");
    WeatherOptions o;
    o.dir = a.dir;
    o.stats = a.stats;
    const WeatherDataset probe(o);
    std::printf("data: %s\nbatch %lld samples = %.1f MB read per batch\n", probe.describe().c_str(), (long long)a.batch,
                double(a.batch * probe.bytes_per_sample()) / 1e6);
    std::printf("page cache, 4 MiB preads, best of 3: %.0f MB/s with 1 thread, %.0f MB/s with %d (the limit)\n\n",
                page_cache_mb_per_s(probe.files(), 1), page_cache_mb_per_s(probe.files(), a.workers), a.workers);

    std::printf("%-8s %-8s %10s %10s\n", "path", "workers", "batches/s", "MB/s");
    for (h5::ReadPath path : {h5::ReadPath::pread, h5::ReadPath::hdf5}) {
      o.read_path = path;
      const WeatherDataset ds(o);
      const EpochSampler s(ds.size(), a.batch, 1, 1, Shuffle::yes);
      for (int w : {0, 1, a.workers}) {
        Loader l(ds, s, 0, 1, kCPU, LoaderOptions{w, 3});
        l.next();  // warm-up: threads started, page cache and scratch buffers filled
        l.take_stats();
        const auto t0 = Clock::now();
        for (int64_t b = 0; b < a.batches; ++b) l.next();
        const double dt = seconds_since(t0);
        std::printf("%-8s %-8d %10.1f %10.0f\n", path == h5::ReadPath::pread ? "pread" : "H5Dread", w,
                    double(a.batches) / dt, double(a.batches * a.batch * ds.bytes_per_sample()) / 1e6 / dt);
      }
    }

    {  // normalisation's cost: the pread rows again with raw values
      o.read_path = h5::ReadPath::pread;
      o.normalize = false;
      const WeatherDataset ds(o);
      const EpochSampler s(ds.size(), a.batch, 1, 1, Shuffle::yes);
      for (int w : {0, a.workers}) {
        Loader l(ds, s, 0, 1, kCPU, LoaderOptions{w, 3});
        l.next();
        const auto t0 = Clock::now();
        for (int64_t b = 0; b < a.batches; ++b) l.next();
        const double dt = seconds_since(t0);
        std::printf("%-8s %-8d %10.1f %10.0f   (not normalised)\n", "pread", w, double(a.batches) / dt,
                    double(a.batches * a.batch * ds.bytes_per_sample()) / 1e6 / dt);
      }
      o.normalize = true;
    }

    std::printf("\nsimulated step of %.0f ms (busy loop), data wait per step:\n", a.step_ms);
    o.read_path = h5::ReadPath::automatic;
    const WeatherDataset ds(o);
    const EpochSampler s(ds.size(), a.batch, 1, 1, Shuffle::yes);
    for (int w : {0, a.workers}) {
      Loader l(ds, s, 0, 1, kCPU, LoaderOptions{w, 3});
      l.next();
      const int64_t n = std::max<int64_t>(5, a.batches / 4);
      l.take_stats();
      for (int64_t b = 0; b < n; ++b) {
        l.next();
        busy_wait(a.step_ms);
      }
      const LoaderStats st = l.take_stats();
      std::printf("  workers %d: wait %.1f ms per step, %.1f%% of the step time\n", w, st.wait_s * 1e3 / double(n),
                  100.0 * st.wait_s / st.interval_s);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loader bench: error: %s\n", e.what());
    return 1;
  }
}
