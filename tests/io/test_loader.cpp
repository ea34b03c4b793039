// The batch loader: batches equal direct reads of the sampler's indices (on
// cpu and on emu, which runs the cuda path's copy stream in order), with 0..3
// workers and rings of 2 and 3; every batch in order under a slow reader;
// resume mid-epoch; a reader's error surfaces on next(); shutdown never hangs.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "io/loader.h"
#include "io/weather_dataset.h"
#include "tests/io/h5_test_util.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const Device kEmuDev{DeviceType::emu, 0};

// Samples computed from their index: x[k] = index * 100 + k, y = index; with
// an optional delay per read and an index that fails.
class CountingDataset : public SampleDataset {
 public:
  explicit CountingDataset(int64_t n, int delay_us = 0, int64_t bad = -1) : n_(n), delay_us_(delay_us), bad_(bad) {}
  int64_t size() const override { return n_; }
  std::vector<int64_t> input_shape() const override { return {2, 3}; }
  std::vector<int64_t> target_shape() const override { return {}; }
  DType target_dtype() const override { return DType::i32; }
  void read(int64_t index, float* x, void* y) const override {
    if (delay_us_ > 0)  // uneven delays, so workers finish out of order
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us_ * (1 + index % 3)));
    ENGINE_CHECK(index != bad_, "counting.h5: dataset 'x': sample ", index, " is damaged");
    for (int k = 0; k < 6; ++k) x[k] = float(index * 100 + k);
    *static_cast<int32_t*>(y) = int32_t(index);
  }
  int64_t bytes_per_sample() const override { return 28; }
  std::string describe() const override { return "counting"; }

 private:
  int64_t n_;
  int delay_us_;
  int64_t bad_;
};

// The samples a batch must hold, by a direct read of the sampler's indices.
void check_batch(const Batch& b, const SampleDataset& ds, const EpochSampler& s, int64_t first_slot) {
  std::vector<int64_t> idx(size_t(s.micro_batch()));
  s.indices(b.pos.epoch, b.pos.step, first_slot + b.pos.micro, idx.data());
  const int64_t xn = shape_numel(ds.input_shape()), yn = std::max<int64_t>(1, shape_numel(ds.target_shape()));
  std::vector<float> x(static_cast<size_t>(xn));
  std::vector<float> y(static_cast<size_t>(yn));
  const auto xv = values(b.x), yv = values(b.y);
  REQUIRE(int64_t(xv.size()) == s.micro_batch() * xn);
  for (size_t j = 0; j < idx.size(); ++j) {
    ds.read(idx[j], x.data(), y.data());
    for (int64_t k = 0; k < xn; ++k) REQUIRE(xv[j * size_t(xn) + size_t(k)] == x[size_t(k)]);
    if (ds.target_dtype() == DType::i32)
      REQUIRE(yv[j] == double(*reinterpret_cast<int32_t*>(y.data())));
    else
      for (int64_t k = 0; k < yn; ++k) REQUIRE(yv[j * size_t(yn) + size_t(k)] == y[size_t(k)]);
  }
}

}  // namespace

TEST_CASE("loader: batches equal direct reads, any workers, ring, device", "[io][loader]") {
  const CountingDataset ds(37);
  const EpochSampler s(37, 3, 2 * 2, 11, Shuffle::yes);  // 2 ranks x 2 micro-batches of 3: 3 steps per epoch
  for (Device dev : {kCPU, kEmuDev})
    for (int workers : {0, 1, 3})
      for (int depth : {2, 3}) {
        INFO(dev.str() << " workers " << workers << " depth " << depth);
        Loader l(ds, s, /*first_slot=*/2, /*accum=*/2, dev, LoaderOptions{workers, depth});
        SamplePosition expect;
        for (int i = 0; i < 14; ++i) {  // past two epoch boundaries
          const Batch b = l.next();
          CHECK(b.pos == expect);
          CHECK(b.x.device() == dev);
          CHECK(b.x.shape() == Shape{3, 2, 3});
          CHECK(b.y.dtype() == DType::i32);
          check_batch(b, ds, s, 2);
          expect.advance(2, s.steps_per_epoch());
          CHECK(l.position() == expect);
        }
        const LoaderStats st = l.take_stats();
        CHECK(st.batches == 14);
        CHECK(st.bytes >= 14 * 3 * 28);
      }
}

TEST_CASE("loader: weather files through the loader equal direct reads", "[io][loader]") {
  const fs::path dir = fs::path(h5_temp("wx_loader"));
  fs::remove_all(dir);
  fs::create_directories(dir / "y");
  std::vector<float> v(7 * 2 * 4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 113) * 0.5f;
  h5_write((dir / "y" / "a.h5").string(), "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {7, 2, 4, 6}, v.data());
  const std::vector<float> mean{1, 2}, sd{3, 4};
  h5_write((dir / "s.h5").string(), "mean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, mean.data());
  h5_write((dir / "s.h5").string(), "std", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, sd.data(), H5Store::contiguous,
           false);
  WeatherOptions o;
  o.dir = (dir / "y").string();
  o.stats = (dir / "s.h5").string();
  o.width = 5;
  const WeatherDataset ds(o);
  const EpochSampler s(ds.size(), 2, 1, 5, Shuffle::yes);
  for (Device dev : {kCPU, kEmuDev}) {
    Loader l(ds, s, 0, 1, dev, LoaderOptions{2, 2});
    for (int i = 0; i < 7; ++i) check_batch(l.next(), ds, s, 0);
  }
}

TEST_CASE("loader: a slow reader still yields every batch in order", "[io][loader]") {
  const CountingDataset slow(40, 300);
  const EpochSampler s(40, 4, 1, 2, Shuffle::yes);
  Loader l(slow, s, 0, 1, kCPU, LoaderOptions{3, 3});
  std::vector<int64_t> seen;
  for (int i = 0; i < 10; ++i) {  // one whole epoch
    const Batch b = l.next();
    CHECK(b.pos.step == i);
    check_batch(b, slow, s, 0);
    for (double v : values(b.y)) seen.push_back(int64_t(v));
  }
  std::sort(seen.begin(), seen.end());
  for (int64_t i = 0; i < 40; ++i) CHECK(seen[size_t(i)] == i);
  CHECK(l.take_stats().wait_s > 0);  // it did wait for the slow reader
}

TEST_CASE("loader: resuming mid-epoch continues the same stream", "[io][loader]") {
  const CountingDataset ds(50);
  const EpochSampler s(50, 4, 3, 9, Shuffle::yes);  // 1 rank x 3 micro-batches: 4 steps per epoch
  std::vector<std::vector<double>> full;
  {
    Loader l(ds, s, 0, 3, kCPU, LoaderOptions{2, 2});
    for (int i = 0; i < 20; ++i) full.push_back(values(l.next().y));
  }
  const SamplePosition mid{1, 2, 1};  // epoch 1, step 2, micro 1
  Loader r(ds, s, 0, 3, kEmuDev, LoaderOptions{1, 3}, mid);
  CHECK(r.position() == mid);
  const int64_t first = 1 * 4 * 3 + 2 * 3 + 1;  // micro-batches before it: 12 + 6 + 1
  for (int64_t i = first; i < 20; ++i) CHECK(values(r.next().y) == full[size_t(i)]);
}

TEST_CASE("loader: a reader's error reaches next(); shutdown never hangs", "[io][loader][errors]") {
  const EpochSampler s(30, 3, 1, 0, Shuffle::no);  // batch k holds samples 3k .. 3k+2
  for (int workers : {0, 2}) {
    INFO("workers " << workers);
    const CountingDataset bad(30, 0, 13);  // in batch 4
    Loader l(bad, s, 0, 1, kEmuDev, LoaderOptions{workers, 2});
    for (int i = 0; i < 4; ++i) CHECK_NOTHROW(l.next());
    CHECK_THROWS_WITH(l.next(),
                      Contains("data loader: ") && Contains("counting.h5: dataset 'x': sample 13 is damaged"));
  }
  // Destroyed while its workers are busy with slow reads: joins promptly.
  const CountingDataset slow(300, 2000);
  const auto t0 = std::chrono::steady_clock::now();
  const EpochSampler s300(300, 10, 1, 0, Shuffle::yes);
  {
    Loader l(slow, s300, 0, 1, kCPU, LoaderOptions{3, 3});
    l.next();
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
}

TEST_CASE("loader: bad options are errors", "[io][loader][errors]") {
  const CountingDataset ds(20);
  const EpochSampler s(20, 2, 2, 0, Shuffle::yes);
  CHECK_THROWS_WITH(Loader(ds, s, 0, 1, kCPU, LoaderOptions{-1, 2}), Contains("--data_workers must be 0 or more"));
  CHECK_THROWS_WITH(Loader(ds, s, 0, 1, kCPU, LoaderOptions{1, 1}), Contains("at least 2 buffers"));
  CHECK_THROWS_WITH(Loader(ds, s, 1, 2, kCPU, LoaderOptions{1, 2}), Contains("outside the sampler's 2"));
}
