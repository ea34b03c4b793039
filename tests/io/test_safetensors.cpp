// safetensors: round trip of every dtype, header layout (8-byte length, JSON,
// aligned data), atomic writes, and named errors for damaged files.
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/safetensors.h"
#include "tests/test_util.h"

using namespace eng;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {
std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "engine_test_safetensors";
  fs::create_directories(dir);
  return (dir / name).string();
}
}  // namespace

TEST_CASE("safetensors: round trip keeps names, order, dtypes, shapes and bytes", "[io][safetensors]") {
  const std::string p = temp_path("rt.safetensors");
  Tensor a = Tensor::randn({3, 5}, 1), b = Tensor::randn({7}, 2).to(DType::bf16);
  Tensor c = Tensor::from_ints({1, -2, 3}, {3}), d = Tensor::randn({2, 2}, 3, 1.f, DType::f64);
  Tensor e = Tensor::randn({4}, 4).to(DType::f16), z = Tensor::empty({0, 3});
  save_safetensors(p, {{"zeta", a}, {"alpha", b}, {"c", c}, {"d", d}, {"e", e}, {"empty", z}}, {{"k", "v"}});
  CHECK(!fs::exists(p + ".tmp"));
  const SafetensorsFile f = load_safetensors(p);
  REQUIRE(f.tensors.size() == 6);
  CHECK(f.tensors[0].first == "zeta");  // file order, not alphabetical
  CHECK(f.tensors[1].first == "alpha");
  CHECK(f.metadata.at("k") == "v");
  for (auto& [name, t] : std::vector<std::pair<std::string, Tensor>>{
           {"zeta", a}, {"alpha", b}, {"c", c}, {"d", d}, {"e", e}, {"empty", z}}) {
    const Tensor& g = f.get(name);
    CHECK(g.dtype() == t.dtype());
    CHECK(g.shape() == t.shape());
    CHECK(std::memcmp(g.data_ptr(), t.data_ptr(), t.nbytes()) == 0);
  }
  // Layout: 8-byte little-endian header length, and data starting 8-aligned.
  std::ifstream in(p, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  CHECK(n % 8 == 0);
  CHECK(n < fs::file_size(p));
  CHECK_THROWS_WITH(f.get("nope"), Contains("rt.safetensors") && Contains("'nope'"));
}

TEST_CASE("safetensors: damaged files give errors naming the file", "[io][safetensors][errors]") {
  const std::string good = temp_path("good.safetensors");
  save_safetensors(good, {{"w", Tensor::randn({16, 16}, 5)}});
  const auto size = fs::file_size(good);
  const std::string cut = temp_path("cut.safetensors");
  fs::copy_file(good, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, size - 10);
  CHECK_THROWS_WITH(load_safetensors(cut), Contains("cut.safetensors") && Contains("'w'") && Contains("truncated"));
  fs::resize_file(cut, 20);
  CHECK_THROWS_WITH(load_safetensors(cut), Contains("cut.safetensors") && Contains("truncated"));
  fs::resize_file(cut, 3);
  CHECK_THROWS_WITH(load_safetensors(cut), Contains("cut.safetensors") && Contains("truncated"));
  // A directory, and a text file: said as such, not as a header of 2^64 bytes.
  CHECK_THROWS_WITH(load_safetensors(fs::path(good).parent_path().string()),
                    Contains("a directory; a .safetensors file is expected"));
  const std::string text = temp_path("notes.txt");
  std::ofstream(text) << "these are not tensors, only a few words of text\n";
  CHECK_THROWS_WITH(load_safetensors(text), Contains("notes.txt: not a safetensors file"));
  const std::string junk = temp_path("junk.safetensors");
  {
    std::ofstream out(junk, std::ios::binary);
    const uint64_t n = 5;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{oops";
  }
  CHECK_THROWS_WITH(load_safetensors(junk), Contains("junk.safetensors") && Contains("bad JSON"));
  CHECK_THROWS_WITH(load_safetensors(temp_path("missing.safetensors")), Contains("missing.safetensors"));
}
