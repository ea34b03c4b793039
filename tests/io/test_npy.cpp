// NumPy .npy files (io/npy.h) against files NumPy itself wrote
// (tests/fixtures/npy, scripts/make_npy_fixture.py).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "io/npy.h"
#include "tests/io/h5_test_util.h"

using namespace eng;
using Catch::Contains;
using eng::test::h5_temp;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(ENGINE_FIXTURE_DIR) + "/npy/";

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("npy: reads what np.save wrote (float32, float64, version 2.0)", "[io][npy]") {
  const NpyArray m = read_npy(kDir + "means.npy");
  CHECK(m.shape == std::vector<int64_t>{1, 3, 1, 1});
  CHECK(m.values == std::vector<float>{100, 200, 300});
  const NpyArray s = read_npy(kDir + "stds.npy");  // float64
  CHECK(s.shape == std::vector<int64_t>{1, 3, 1, 1});
  CHECK(s.values == std::vector<float>{2, 4, 8});
  const NpyArray f = read_npy(kDir + "flat_v2.npy");  // a 4-byte header length
  CHECK(f.shape == std::vector<int64_t>{3});
  CHECK(f.values == std::vector<float>{1.5f, -2.0f, 1e-3f});
  const NpyArray t = read_npy(kDir + "time_means.npy");
  REQUIRE(t.shape == std::vector<int64_t>{1, 3, 6, 8});
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < 8; ++x)
        CHECK(t.values[size_t((c * 6 + y) * 8 + x)] == float(90 + 100 * c + 3 * y) + 0.5f * float(x));
}

TEST_CASE("npy: write_npy writes np.save's bytes", "[io][npy]") {
  const std::string path = h5_temp("written.npy");
  write_npy(path, {1, 3, 1, 1}, {100, 200, 300});
  CHECK(bytes_of(path) == bytes_of(kDir + "means.npy"));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  write_npy(path, {3}, {1.5f, -2.0f, 1e-3f});  // a one-element tuple is "(3,)"
  const NpyArray a = read_npy(path);
  CHECK(a.shape == std::vector<int64_t>{3});
  CHECK(a.values == std::vector<float>{1.5f, -2.0f, 1e-3f});
}

TEST_CASE("npy: what is not read is an error naming the file and the fix", "[io][npy][errors]") {
  CHECK_THROWS_WITH(read_npy(kDir + "fortran.npy"), Contains("fortran.npy") && Contains("Fortran order"));
  CHECK_THROWS_WITH(read_npy(kDir + "big_endian.npy"), Contains("big_endian.npy") && Contains("dtype '>f4'"));
  CHECK_THROWS_WITH(read_npy(kDir + "int32.npy"), Contains("int32.npy") && Contains("dtype '<i4'"));
  CHECK_THROWS_WITH(read_npy(kDir + "missing.npy"), Contains("missing.npy") && Contains("cannot open"));
  const std::string cut = h5_temp("cut.npy"), text = h5_temp("text.npy");
  const std::string whole = bytes_of(kDir + "means.npy");
  std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() - 4);
  CHECK_THROWS_WITH(read_npy(cut), Contains("cut.npy") && Contains("3 values of 4 bytes announced"));
  std::ofstream(text) << "mean,std\n1,2\n";
  CHECK_THROWS_WITH(read_npy(text), Contains("text.npy") && Contains("not a NumPy .npy file"));
}
