// The HDF5 reader (io/hdf5.h) against files written with the C API: values,
// boxes (crops), element-type conversion, pread vs H5Dread, and bad input as
// one-line errors naming the file and the dataset.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "io/hdf5.h"
#include "tests/io/h5_test_util.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::test;
using Catch::Contains;

namespace {

// Element (t, c, y, x) of a (T, C, H, W) array, row-major.
float pattern(int64_t i) { return float(i % 97) * 0.25f - 7.0f; }

std::vector<float> pattern_data(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = pattern(i);
  return v;
}

// The reference crop: a plain loop over the full array.
std::vector<float> ref_box(const std::vector<float>& all, const std::vector<int64_t>& shape,
                           const std::vector<int64_t>& start, const std::vector<int64_t>& count) {
  std::vector<float> out;
  for (int64_t a = 0; a < count[0]; ++a)
    for (int64_t b = 0; b < count[1]; ++b)
      for (int64_t c = 0; c < count[2]; ++c)
        for (int64_t d = 0; d < count[3]; ++d) {
          const int64_t i =
              (((start[0] + a) * shape[1] + start[1] + b) * shape[2] + start[2] + c) * shape[3] + start[3] + d;
          out.push_back(all[size_t(i)]);
        }
  return out;
}

std::vector<float> read_box(const h5::Dataset& d, const std::vector<int64_t>& start, const std::vector<int64_t>& count,
                            h5::ReadPath p) {
  int64_t n = 1;
  for (int64_t c : count) n *= c;
  std::vector<float> out(static_cast<size_t>(n), -999.f);
  d.read(start, count, out.data(), p);
  return out;
}

}  // namespace

TEST_CASE("hdf5: boxes of a contiguous dataset by pread and by H5Dread", "[io][hdf5]") {
  const std::string p = h5_temp("contig.h5");
  const std::vector<int64_t> shape{4, 3, 5, 7};
  const auto all = pattern_data(4 * 3 * 5 * 7);
  h5_write(p, "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4, 3, 5, 7}, all.data());
  const h5::File f(p);
  const h5::Dataset d(f, "fields");
  CHECK(d.type() == h5::ElemType::f32);
  CHECK(d.shape() == shape);
  CHECK(d.preadable());
  CHECK(d.layout() == "contiguous");
  // A sample, a crop (partial rows), a full-width crop (one run per channel),
  // several channels, and the whole array.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> boxes{{{2, 0, 0, 0}, {1, 3, 5, 7}},
                                                                                 {{1, 1, 1, 2}, {1, 2, 3, 4}},
                                                                                 {{3, 0, 1, 0}, {1, 3, 4, 7}},
                                                                                 {{0, 2, 4, 6}, {4, 1, 1, 1}},
                                                                                 {{0, 0, 0, 0}, {4, 3, 5, 7}}};
  for (const auto& [start, count] : boxes) {
    const auto ref = ref_box(all, shape, start, count);
    const auto a = read_box(d, start, count, h5::ReadPath::pread);
    const auto b = read_box(d, start, count, h5::ReadPath::hdf5);
    CHECK(a == ref);
    CHECK(b == ref);
  }
}

TEST_CASE("hdf5: chunked and gzip datasets go through H5Dread", "[io][hdf5]") {
  const std::vector<int64_t> shape{3, 2, 6, 5};
  const auto all = pattern_data(3 * 2 * 6 * 5);
  for (H5Store store : {H5Store::chunked, H5Store::gzip}) {
    const std::string p = h5_temp(store == H5Store::gzip ? "gzip.h5" : "chunked.h5");
    h5_write(p, "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {3, 2, 6, 5}, all.data(), store);
    const h5::File f(p);
    const h5::Dataset d(f, "fields");
    CHECK_FALSE(d.preadable());
    const std::vector<int64_t> start{1, 0, 2, 1}, count{2, 2, 3, 4};
    CHECK(read_box(d, start, count, h5::ReadPath::automatic) == ref_box(all, shape, start, count));
    CHECK_THROWS_WITH(read_box(d, start, count, h5::ReadPath::pread),
                      Contains(p) && Contains("'fields'") && Contains("pread needs a contiguous"));
  }
}

TEST_CASE("hdf5: pread and H5Dread give the same bytes on random boxes", "[io][hdf5]") {
  const std::string p = h5_temp("random_boxes.h5");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-100.f, 100.f);
  std::vector<float> all(6 * 4 * 9 * 11);
  for (float& v : all) v = u(rng);
  h5_write(p, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {6, 4, 9, 11}, all.data());
  const h5::File f(p);
  const h5::Dataset d(f, "x");
  const std::vector<int64_t> shape{6, 4, 9, 11};
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> start(4), count(4);
    for (int k = 0; k < 4; ++k) {
      start[size_t(k)] = int64_t(rng() % uint32_t(shape[size_t(k)]));
      count[size_t(k)] = 1 + int64_t(rng() % uint32_t(shape[size_t(k)] - start[size_t(k)]));
    }
    const auto a = read_box(d, start, count, h5::ReadPath::pread);
    const auto b = read_box(d, start, count, h5::ReadPath::hdf5);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    CHECK(a == ref_box(all, shape, start, count));
  }
}

TEST_CASE("hdf5: element types convert to float32 and int64", "[io][hdf5]") {
  const std::string p = h5_temp("types.h5");
  // Values every type can hold exactly.
  const std::vector<double> vals{0, 1, 2, 3, 7, 100, 127, 5};
  const std::vector<double> signed_vals{0, -1, 2, -3, 7, -100, 127, -128};
  struct Case {
    const char* name;
    hid_t file_type;
    h5::ElemType expect;
    bool is_signed;
  };
  const std::vector<Case> cases{
      {"u8", H5T_STD_U8LE, h5::ElemType::u8, false},     {"i8", H5T_STD_I8LE, h5::ElemType::i8, true},
      {"u16", H5T_STD_U16LE, h5::ElemType::u16, false},  {"i16", H5T_STD_I16BE, h5::ElemType::i16, true},
      {"i32", H5T_STD_I32LE, h5::ElemType::i32, true},   {"u32", H5T_STD_U32LE, h5::ElemType::u32, false},
      {"i64", H5T_STD_I64LE, h5::ElemType::i64, true},   {"f64", H5T_IEEE_F64LE, h5::ElemType::f64, true},
      {"f32be", H5T_IEEE_F32BE, h5::ElemType::f32, true}};
  bool first = true;
  for (const Case& c : cases) {
    const auto& v = c.is_signed ? signed_vals : vals;
    h5_write(p, c.name, c.file_type, H5T_NATIVE_DOUBLE, {2, 4}, v.data(), H5Store::contiguous, first);
    first = false;
  }
  const h5::File f(p);
  for (const Case& c : cases) {
    INFO(c.name);
    const h5::Dataset d(f, c.name);
    CHECK(d.type() == c.expect);
    const auto& v = c.is_signed ? signed_vals : vals;
    std::vector<float> out(8);
    const int64_t start[2] = {0, 0}, count[2] = {2, 4};
    d.read(start, count, out.data());
    for (size_t i = 0; i < 8; ++i) CHECK(out[i] == float(v[i]));
    if (d.type() != h5::ElemType::f64 && d.type() != h5::ElemType::f32) {
      std::vector<int64_t> iv(8);
      d.read_i64(start, count, iv.data());
      for (size_t i = 0; i < 8; ++i) CHECK(iv[i] == int64_t(v[i]));
    }
  }
  // Big-endian data is converted by HDF5, so it takes the H5Dread path.
  CHECK_FALSE(h5::Dataset(f, "i16").preadable());
  CHECK_FALSE(h5::Dataset(f, "f32be").preadable());
  CHECK(h5::Dataset(f, "i32").preadable());
}

TEST_CASE("hdf5: float16 written by HDF5's own conversion reads back", "[io][hdf5]") {
  const std::string p = h5_temp("half.h5");
  // IEEE binary16 built the way h5py builds it; HDF5 converts the doubles.
  const hid_t half = H5Tcopy(H5T_IEEE_F32LE);
  REQUIRE(H5Tset_fields(half, 15, 10, 5, 0, 10) >= 0);
  REQUIRE(H5Tset_size(half, 2) >= 0);
  REQUIRE(H5Tset_ebias(half, 15) >= 0);
  const std::vector<double> v{0.5, -2.0, 1024.0, 0.0009765625, 65504.0, -0.125, 3.140625, 0.0};
  h5_write(p, "h", half, H5T_NATIVE_DOUBLE, {8}, v.data());
  H5Tclose(half);
  const h5::File f(p);
  const h5::Dataset d(f, "h");
  CHECK(d.type() == h5::ElemType::f16);
  std::vector<float> out(8);
  const int64_t start = 0, count = 8;
  for (h5::ReadPath path : {h5::ReadPath::pread, h5::ReadPath::hdf5}) {
    d.read({&start, 1}, {&count, 1}, out.data(), path);
    for (size_t i = 0; i < 8; ++i) CHECK(out[i] == float(v[i]));
  }
}

TEST_CASE("hdf5: attributes", "[io][hdf5]") {
  const std::string p = h5_temp("attrs.h5");
  const std::vector<float> v{1, 2};
  h5_write(p, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, v.data());
  h5_attr(p, "x", "mean", 0.25);
  const h5::File f(p);
  const h5::Dataset d(f, "x");
  CHECK(d.attribute("mean") == 0.25);
  CHECK_FALSE(d.attribute("std").has_value());
}

TEST_CASE("hdf5: bad input is a one-line error naming file and dataset", "[io][hdf5][errors]") {
  const std::string p = h5_temp("bad.h5");
  const auto all = pattern_data(2 * 3 * 4 * 5);
  h5_write(p, "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 3, 4, 5}, all.data());
  SECTION("missing file") {
    CHECK_THROWS_WITH(h5::File(h5_temp("nope.h5")), Contains("nope.h5") && Contains("cannot open HDF5 file"));
  }
  SECTION("not an HDF5 file") {
    const std::string t = h5_temp("text.h5");
    std::ofstream(t) << "just some text, not HDF5\n";
    CHECK_THROWS_WITH(h5::File(t), Contains("text.h5") && Contains("not an HDF5 file"));
  }
  SECTION("missing dataset") {
    const h5::File f(p);
    CHECK_THROWS_WITH(h5::Dataset(f, "fieldz"), Contains("bad.h5: dataset 'fieldz': missing"));
  }
  SECTION("box outside the data (a crop larger than the fields)") {
    const h5::File f(p);
    const h5::Dataset d(f, "fields");
    std::vector<float> out(1000);
    const int64_t start[4] = {0, 0, 0, 0}, count[4] = {1, 3, 5, 5};
    CHECK_THROWS_WITH(d.read(start, count, out.data()),
                      Contains("bad.h5: dataset 'fields'") && Contains("dimension 2 is outside its size 4"));
    const int64_t short_start[2] = {0, 0};
    CHECK_THROWS_WITH(d.read({short_start, 2}, {short_start, 2}, out.data()), Contains("needs 4 indices"));
  }
  SECTION("unsupported element type") {
    const hid_t str = H5Tcopy(H5T_C_S1);
    REQUIRE(H5Tset_size(str, 4) >= 0);
    const char data[8] = {'a', 'b', 'c', 0, 'd', 'e', 'f', 0};
    h5_write(p, "names", str, str, {2}, data, H5Store::contiguous, false);
    H5Tclose(str);
    const h5::File f(p);
    CHECK_THROWS_WITH(h5::Dataset(f, "names"),
                      Contains("bad.h5: dataset 'names'") && Contains("unsupported element type (string)"));
  }
  SECTION("a scalar dataset") {
    const float one = 1.f;
    h5_write(p, "scalar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {}, &one, H5Store::contiguous, false);
    const h5::File f(p);
    CHECK_THROWS_WITH(h5::Dataset(f, "scalar"), Contains("bad.h5: dataset 'scalar': a scalar (rank 0)"));
  }
  SECTION("integers asked of a float dataset") {
    const h5::File f(p);
    const h5::Dataset d(f, "fields");
    std::vector<int64_t> out(5);
    const int64_t start[4] = {0, 0, 0, 0}, count[4] = {1, 1, 1, 5};
    CHECK_THROWS_WITH(d.read_i64(start, count, out.data()), Contains("integers expected"));
  }
  SECTION("truncated file") {
    const std::string t = h5_temp("truncated.h5");
    std::filesystem::copy_file(p, t, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(t, std::filesystem::file_size(t) - 200);
    auto open_and_read = [&] {
      const h5::File f(t);
      const h5::Dataset d(f, "fields");
      std::vector<float> out(120);
      const int64_t start[4] = {0, 0, 0, 0}, count[4] = {2, 3, 4, 5};
      d.read(start, count, out.data());
    };
    CHECK_THROWS_WITH(open_and_read(), Contains("truncated.h5") && Contains("truncated"));
  }
}

TEST_CASE("hdf5: a file cut, or cut and grown back, after it was opened is an error on both read paths, never zeros",
          "[io][hdf5][errors]") {
  // HDF5 refuses a truncated file at open, but H5Dread of chunks cut off
  // later returns zeros and success: the reader compares the file's size,
  // and, for a file grown back to its size (zeros where the data was), its
  // modification time.
  const auto all = pattern_data(6 * 2 * 4 * 5);
  for (const bool regrow : {false, true})
    for (const H5Store store : {H5Store::contiguous, H5Store::chunked}) {
      const std::string p =
          h5_temp(cat(regrow ? "regrown_" : "cut_", store == H5Store::chunked ? "chunked" : "contiguous", ".h5"));
      h5_write(p, "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {6, 2, 4, 5}, all.data(), store);
      // An hour old, so the truncation below is a later modification time whatever the clock's grain.
      std::filesystem::last_write_time(p, std::filesystem::last_write_time(p) - std::chrono::hours(1));
      const h5::File f(p);
      const h5::Dataset d(f, "fields");
      const std::vector<int64_t> last{5, 0, 0, 0}, one{1, 2, 4, 5};
      CHECK(read_box(d, last, one, h5::ReadPath::hdf5) == ref_box(all, {6, 2, 4, 5}, last, one));
      const auto size = std::filesystem::file_size(p);
      std::filesystem::resize_file(p, size / 2);
      if (regrow) std::filesystem::resize_file(p, size);
      std::vector<h5::ReadPath> paths{h5::ReadPath::hdf5};
      if (d.preadable()) paths.push_back(h5::ReadPath::pread);
      for (const h5::ReadPath path : paths) {
        INFO(d.layout() << (path == h5::ReadPath::pread ? " by pread" : " by H5Dread") << (regrow ? ", regrown" : ""));
        if (regrow)
          CHECK_THROWS_WITH(read_box(d, last, one, path),
                            Contains(p + ": dataset 'fields': the file was modified since it was opened") &&
                                Contains(cat("size ", size, " -> ", size, " bytes")));
        else
          CHECK_THROWS_WITH(read_box(d, last, one, path), Contains(p + ": dataset 'fields'") &&
                                                              Contains("the file shrank from") &&
                                                              Contains("since it was opened"));
      }
    }
}

TEST_CASE("hdf5: a NaN or Inf in float data is an error naming its index", "[io][hdf5][errors]") {
  const std::vector<int64_t> shape{3, 2, 4, 5};
  auto data = pattern_data(3 * 2 * 4 * 5);
  data[size_t(((1 * 2 + 1) * 4 + 2) * 5 + 3)] = std::numeric_limits<float>::quiet_NaN();  // (1, 1, 2, 3)
  data[size_t(((2 * 2 + 0) * 4 + 0) * 5 + 4)] = -std::numeric_limits<float>::infinity();  // (2, 0, 0, 4)
  for (const H5Store store : {H5Store::contiguous, H5Store::chunked}) {
    const std::string p = h5_temp("nonfinite.h5");
    h5_write(p, "fields", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {3, 2, 4, 5}, data.data(), store);
    std::vector<double> as_f64(data.begin(), data.end());
    h5_write(p, "fields64", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {3, 2, 4, 5}, as_f64.data(), store, false);
    const h5::File f(p);
    for (const char* name : {"fields", "fields64"}) {
      const h5::Dataset d(f, name);
      INFO(name << ", " << d.layout());
      const std::vector<int64_t> first{0, 0, 0, 0}, one{1, 2, 4, 5};
      CHECK(read_box(d, first, one, h5::ReadPath::hdf5) == ref_box(data, shape, first, one));  // entry 0 is clean
      CHECK_THROWS_WITH(read_box(d, {1, 0, 0, 0}, one, h5::ReadPath::automatic),
                        Contains(cat(p, ": dataset '", name, "': NaN at index (1, 1, 2, 3), entry 1")));
      CHECK_THROWS_WITH(read_box(d, {2, 0, 0, 2}, {1, 1, 1, 3}, h5::ReadPath::automatic),
                        Contains(": Inf") && Contains("at index (2, 0, 0, 4), entry 2"));
    }
  }
  // A finite float64 beyond float32's range becomes Inf on the way: said so.
  const std::string p = h5_temp("huge64.h5");
  const std::vector<double> huge{1.0, 1e300, 2.0};
  h5_write(p, "v", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {3}, huge.data());
  const h5::File f(p);
  const h5::Dataset d(f, "v");
  std::vector<float> out(3);
  const int64_t start = 0, count = 3;
  CHECK_THROWS_WITH(d.read({&start, 1}, {&count, 1}, out.data()),
                    Contains("Inf (or a float64 beyond float32's range) at index (1)"));
}
