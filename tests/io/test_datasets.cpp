// Weather and image datasets: samples equal a plain computation from the
// arrays the test wrote (crop, channel subsets, normalisation, file
// boundaries, channel-last images; the weather climatology likewise), the
// h5py fixture, and bad input.
#include <filesystem>

#include "io/image_dataset.h"
#include "io/weather_dataset.h"
#include "tests/io/h5_test_util.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kC = 3, kH = 6, kW = 8;

// Field value (file, t, c, y, x): distinct everywhere, so a wrong index shows.
float field(int file, int64_t t, int64_t c, int64_t y, int64_t x) {
  return float(file * 1000 + t * 100 + c * 10 + y) + float(x) * 0.125f;
}

void write_year(const std::string& path, int file, int64_t T, int64_t C = kC, int64_t H = kH, int64_t W = kW) {
  std::vector<float> v;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) v.push_back(field(file, t, c, y, x));
  h5_write(path, "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {hsize_t(T), hsize_t(C), hsize_t(H), hsize_t(W)},
           v.data());
}

void write_stats(const std::string& path, const std::vector<float>& mean, const std::vector<float>& sd) {
  h5_write(path, "mean", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {hsize_t(mean.size())}, mean.data());
  h5_write(path, "std", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {hsize_t(sd.size())}, sd.data(), H5Store::contiguous, false);
}

// Climatology value (c, y, x) before normalisation: distinct everywhere too.
float clim_value(int64_t c, int64_t y, int64_t x) { return float(90 + 100 * c + 3 * y) + float(x) * 0.5f; }

// Adds `climatology` of shape (C, H, W) to an existing stats file.
void write_climatology(const std::string& path, int64_t C, int64_t H, int64_t W) {
  std::vector<float> v;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) v.push_back(clim_value(c, y, x));
  h5_write(path, "climatology", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {hsize_t(C), hsize_t(H), hsize_t(W)}, v.data(),
           H5Store::contiguous, false);
}

// A directory of two years (T = 5 and 4) and a stats file.
WeatherOptions weather_dir(const std::string& name) {
  const fs::path dir = fs::path(h5_temp(name));
  fs::remove_all(dir);
  fs::create_directories(dir / "train");
  write_year((dir / "train" / "2000.h5").string(), 0, 5);
  write_year((dir / "train" / "2001.h5").string(), 1, 4);
  write_stats((dir / "stats.h5").string(), {100, 200, 300}, {2, 4, 8});
  WeatherOptions o;
  o.dir = (dir / "train").string();
  o.stats = (dir / "stats.h5").string();
  return o;
}

}  // namespace

TEST_CASE("weather: samples are normalised crops of (t, t + dt) across files", "[io][data]") {
  WeatherOptions o = weather_dir("wx_ok");
  o.dt = 2;
  o.height = 4;
  o.width = 5;
  o.in_channels = {0, 2};
  o.out_channels = {1};
  const float mean[3] = {100, 200, 300}, sd[3] = {2, 4, 8};
  for (h5::ReadPath path : {h5::ReadPath::pread, h5::ReadPath::hdf5}) {
    o.read_path = path;
    const WeatherDataset d(o);
    REQUIRE(d.size() == 3 + 2);  // (5 - 2) + (4 - 2)
    CHECK(d.input_shape() == std::vector<int64_t>{2, 4, 5});
    CHECK(d.target_shape() == std::vector<int64_t>{1, 4, 5});
    for (int64_t i = 0; i < d.size(); ++i) {
      const int file = i < 3 ? 0 : 1;
      const int64_t t = i < 3 ? i : i - 3;
      CHECK(d.locate(i) == std::pair<int, int64_t>{file, t});
      std::vector<float> x(40), y(20);
      d.read(i, x.data(), y.data());
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t r = 0; r < 4; ++r)
          for (int64_t c = 0; c < 5; ++c) {
            const int64_t ch = o.in_channels[size_t(k)];
            CHECK(x[size_t((k * 4 + r) * 5 + c)] == (field(file, t, ch, r, c) - mean[ch]) / sd[ch]);
          }
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 5; ++c) CHECK(y[size_t(r * 5 + c)] == (field(file, t + 2, 1, r, c) - mean[1]) / sd[1]);
    }
    // Latitudes of the crop's 4 rows, by the NERSC tutorial's metrics
    // (lat(j) = 90 - 180 j / (num_lat - 1), num_lat = 4): 90, 30, -30, -90.
    REQUIRE(d.latitudes().size() == 4);
    CHECK(d.latitudes()[0] == Approx(90.0));
    CHECK(d.latitudes()[1] == Approx(30.0));
    CHECK(d.latitudes()[3] == Approx(-90.0));
  }
}

TEST_CASE("weather: the climatology is cropped, subset to out_channels and normalised", "[io][data]") {
  WeatherOptions o = weather_dir("wx_clim");
  CHECK(WeatherDataset(o).climatology().empty());  // the stats file has none
  write_climatology(o.stats, kC, kH, kW);
  o.height = 4;
  o.width = 5;
  o.out_channels = {2, 0};  // out of order: the climatology follows the list
  const float mean[3] = {100, 200, 300}, sd[3] = {2, 4, 8};
  const WeatherDataset d(o);
  const std::vector<float>& clim = d.climatology();
  REQUIRE(clim.size() == 2 * 4 * 5);
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t c = 0; c < 5; ++c) {
        const int64_t ch = o.out_channels[size_t(k)];
        CHECK(clim[size_t((k * 4 + r) * 5 + c)] == (clim_value(ch, r, c) - mean[ch]) / sd[ch]);
      }
}

TEST_CASE("weather: a stats/ directory of NumPy files normalises as the HDF5 stats file", "[io][data][npy]") {
  // The NERSC tutorial's layout: global_means.npy, global_stds.npy (1, C, 1, 1)
  // and time_means.npy (1, C, H, W), here the files NumPy wrote with the
  // values of weather_dir's stats file and write_climatology's pattern.
  WeatherOptions h5 = weather_dir("wx_npy");
  write_climatology(h5.stats, kC, kH, kW);
  const fs::path stats = fs::path(h5.stats).parent_path() / "stats";
  fs::create_directories(stats);
  const std::string fix = std::string(ENGINE_FIXTURE_DIR) + "/npy/";
  fs::copy_file(fix + "means.npy", stats / "global_means.npy");
  fs::copy_file(fix + "stds.npy", stats / "global_stds.npy");
  WeatherOptions npy = h5;
  npy.stats = stats.string();
  for (WeatherOptions* o : {&h5, &npy}) o->height = 4, o->width = 5, o->out_channels = {2, 0};
  {
    const WeatherDataset a(h5), b(npy);
    CHECK(a.means() == b.means());
    CHECK(a.stds() == b.stds());
    CHECK(b.climatology().empty());  // no time_means.npy yet
    for (int64_t i = 0; i < a.size(); ++i) {
      std::vector<float> xa(3 * 20), ya(2 * 20), xb(3 * 20), yb(2 * 20);
      a.read(i, xa.data(), ya.data());
      b.read(i, xb.data(), yb.data());
      CHECK(xa == xb);
      CHECK(ya == yb);
    }
  }
  fs::copy_file(fix + "means.npy", stats / "time_means.npy");  // (1, 3, 1, 1): a climatology of the wrong size
  CHECK_THROWS_WITH(WeatherDataset(npy), Contains("time_means.npy: shape (1, 3, 1, 1), expected (1, 3, at least 4, "
                                                  "at least 5)"));
  fs::copy_file(fix + "time_means.npy", stats / "time_means.npy", fs::copy_options::overwrite_existing);
  CHECK(WeatherDataset(npy).climatology() == WeatherDataset(h5).climatology());
  fs::remove(stats / "global_stds.npy");
  CHECK_THROWS_WITH(WeatherDataset(npy), Contains("needs global_stds.npy") && Contains(stats.string()));
  fs::copy_file(fix + "flat_v2.npy", stats / "global_stds.npy");  // 3 values, but not these
  fs::copy_file(fix + "means.npy", stats / "global_means.npy", fs::copy_options::overwrite_existing);
  fs::remove(stats / "time_means.npy");
  npy.out_channels = {0};
  CHECK_THROWS_WITH(WeatherDataset(npy), Contains(stats.string()) && Contains("channel 1 has mean 200 and std -2"));
}

TEST_CASE("weather: bad input names the file and what is wrong", "[io][data][errors]") {
  WeatherOptions o = weather_dir("wx_bad");
  SECTION("stats with another channel count") {
    const std::string s = h5_temp("stats2.h5");
    write_stats(s, {1, 2}, {1, 1});
    o.stats = s;
    CHECK_THROWS_WITH(WeatherDataset(o),
                      Contains("stats2.h5: dataset 'mean'") && Contains("2 values, but the fields have 3 channels"));
  }
  SECTION("a zero std") {
    const std::string s = h5_temp("stats0.h5");
    write_stats(s, {1, 2, 3}, {1, 0, 1});
    o.stats = s;
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("stats0.h5: channel 1") && Contains("std must be positive"));
  }
  SECTION("a climatology smaller than the crop") {
    write_climatology(o.stats, kC, kH - 1, kW);
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("stats.h5: dataset 'climatology'") &&
                                             Contains("expected shape (3, at least 6, at least 8)") &&
                                             Contains("got (3, 5, 8)"));
  }
  SECTION("a climatology with another channel count") {
    write_climatology(o.stats, kC - 1, kH, kW);
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("stats.h5: dataset 'climatology'") && Contains("got (2, 6, 8)"));
  }
  SECTION("crop larger than the fields") {
    o.height = 7;
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("2000.h5: dataset 'fields'") && Contains("crop 7 x 8 is larger"));
  }
  SECTION("fields of the wrong rank") {
    const std::vector<float> v(24, 1.f);
    h5_write(o.dir + "/2002.h5", "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 3, 4}, v.data());
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("2002.h5: dataset 'fields'") && Contains("got rank 3"));
  }
  SECTION("a year with another grid") {
    write_year(o.dir + "/2002.h5", 2, 4, kC, kH, kW + 1);
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("2002.h5") && Contains("differs from"));
  }
  SECTION("too few steps for dt") {
    o.dt = 4;
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("2001.h5") && Contains("4 time steps, too few for dt = 4"));
  }
  SECTION("a channel that does not exist") {
    o.in_channels = {0, 3};
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("channel 3 does not exist (3 channels)"));
  }
  SECTION("no files") {
    o.dir = h5_temp("wx_empty_dir");
    fs::create_directories(o.dir);
    CHECK_THROWS_WITH(WeatherDataset(o), Contains("wx_empty_dir: no .h5 files"));
  }
}

TEST_CASE("weather: channel lists parse", "[io][data]") {
  CHECK(parse_channels("0-2,5") == std::vector<int>{0, 1, 2, 5});
  CHECK(parse_channels("7") == std::vector<int>{7});
  CHECK_THROWS_WITH(parse_channels("1,x"), Contains("channels '1,x'"));
  CHECK_THROWS_WITH(parse_channels("3-1"), Contains("channels '3-1'"));
}

TEST_CASE("images: the h5py fixture (channel-last uint8, gzip chunks, float16)", "[io][data]") {
  const std::string p = std::string(ENGINE_FIXTURE_DIR) + "/h5py_small.h5";
  const ImageDataset d(p);
  REQUIRE(d.size() == 6);
  CHECK(d.input_shape() == std::vector<int64_t>{3, 5, 4});
  CHECK(d.classes() == 3);
  std::vector<float> x(60);
  int32_t label = -1;
  for (int64_t i = 0; i < 6; ++i) {
    d.read(i, x.data(), &label);
    CHECK(label == i % 3);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 5; ++y)
        for (int64_t xx = 0; xx < 4; ++xx) {
          const float raw = float((i * 7 + y * 3 + xx * 2 + c) % 256);
          CHECK(x[size_t((c * 5 + y) * 4 + xx)] == (raw / 255.0f - 0.5f) / 0.25f);
        }
  }
  const h5::File f(p);
  const h5::Dataset fields(f, "fields");
  CHECK(fields.type() == h5::ElemType::f16);
  std::vector<float> all(4 * 2 * 3 * 5);
  const int64_t start[4] = {0, 0, 0, 0};
  fields.read(start, fields.shape(), all.data());
  for (int64_t i = 0; i < int64_t(all.size()); ++i) CHECK(all[size_t(i)] == float(i) * 0.25f - 10.0f);
}

TEST_CASE("images: (N, H, W) uint8 without attributes; bad labels", "[io][data][errors]") {
  const std::string p = h5_temp("mnistish.h5");
  std::vector<uint8_t> im(4 * 2 * 3);
  for (size_t i = 0; i < im.size(); ++i) im[i] = uint8_t(i * 10);
  const std::vector<int64_t> lab{0, 1, 1, 0};
  h5_write(p, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, {4, 2, 3}, im.data());
  h5_write(p, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {4}, lab.data(), H5Store::contiguous, false);
  const ImageDataset d(p);
  CHECK(d.input_shape() == std::vector<int64_t>{1, 2, 3});
  CHECK(d.classes() == 2);
  std::vector<float> x(6);
  int32_t y = -1;
  d.read(2, x.data(), &y);
  CHECK(y == 1);
  for (int64_t k = 0; k < 6; ++k) CHECK(x[size_t(k)] == float(uint8_t((12 + k) * 10)) / 255.0f);

  const std::string q = h5_temp("badlabels.h5");
  const std::vector<int64_t> bad{0, 1, -1, 0};
  h5_write(q, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, {4, 2, 3}, im.data());
  h5_write(q, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {4}, bad.data(), H5Store::contiguous, false);
  CHECK_THROWS_WITH(ImageDataset(q), Contains("badlabels.h5: dataset 'labels'") && Contains("label -1 of sample 2"));
  const std::string r = h5_temp("fewlabels.h5");
  h5_write(r, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, {4, 2, 3}, im.data());
  h5_write(r, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {3}, bad.data(), H5Store::contiguous, false);
  CHECK_THROWS_WITH(ImageDataset(r), Contains("fewlabels.h5: dataset 'labels'") && Contains("expected (4) labels"));
}

TEST_CASE("images: one stray label does not build a huge head without a 'classes' attribute", "[io][data][errors]") {
  std::vector<uint8_t> im(4 * 2 * 3, 7);
  const std::string p = h5_temp("straylabel.h5");
  const std::vector<int64_t> lab{0, 1, 1000000, 0};
  h5_write(p, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, {4, 2, 3}, im.data());
  h5_write(p, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {4}, lab.data(), H5Store::contiguous, false);
  CHECK_THROWS_WITH(ImageDataset(p), Contains("straylabel.h5: dataset 'labels': label 1000000 of sample 2") &&
                                         Contains("implies 1000001 classes, but only 3 distinct labels occur"));
  // Meant: the attribute says so, and is believed.
  h5_attr(p, "labels", "classes", 1000001);
  CHECK(ImageDataset(p).classes() == 1000001);
  // Many unseen classes in a small split are fine: labels 0 and 999 of 1000.
  const std::string q = h5_temp("sparselabels.h5");
  const std::vector<int64_t> sparse{0, 999, 999, 0};
  h5_write(q, "images", H5T_STD_U8LE, H5T_NATIVE_UINT8, {4, 2, 3}, im.data());
  h5_write(q, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {4}, sparse.data(), H5Store::contiguous, false);
  CHECK(ImageDataset(q).classes() == 1000);
}
