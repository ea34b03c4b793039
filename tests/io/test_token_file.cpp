// Token files and the batch sampler: layout, validation errors, targets as
// inputs shifted by one, reproducible random windows, sequential windows.
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/token_file.h"
#include "tests/test_util.h"

using namespace eng;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {
std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "engine_test_tokens";
  fs::create_directories(dir);
  return (dir / name).string();
}
}  // namespace

TEST_CASE("token file: round trip, little-endian uint16", "[io][tokens]") {
  const std::string p = temp_path("a.bin");
  std::vector<uint16_t> toks(100);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t(i * 3 % 250);
  write_token_file(p, toks);
  CHECK(fs::file_size(p) == 200);
  std::ifstream in(p, std::ios::binary);
  unsigned char b[4];
  in.read(reinterpret_cast<char*>(b), 4);
  CHECK((b[0] | b[1] << 8) == 0);
  CHECK((b[2] | b[3] << 8) == 3);
  TokenFile f(p, 256);
  REQUIRE(f.size() == 100);
  std::vector<uint16_t> back(100);
  f.read(0, 100, back.data());
  CHECK(back == toks);
  CHECK(!fs::exists(p + ".tmp"));
}

TEST_CASE("token file: bad files are named errors", "[io][tokens][errors]") {
  const std::string odd = temp_path("odd.bin");
  std::ofstream(odd, std::ios::binary) << "abc";
  CHECK_THROWS_WITH(TokenFile(odd, 256), Contains("odd.bin") && Contains("odd byte count 3"));
  const std::string big = temp_path("big.bin");
  write_token_file(big, {1, 2, 300, 4});
  CHECK_THROWS_WITH(TokenFile(big, 256), Contains("big.bin") && Contains("token id 300 at position 2"));
  CHECK_NOTHROW(TokenFile(big, 301));
  CHECK_THROWS_WITH(TokenFile(temp_path("none.bin"), 256), Contains("none.bin") && Contains("cannot open"));
  const std::string empty = temp_path("empty.bin");
  std::ofstream(empty, std::ios::binary).flush();
  CHECK_THROWS_WITH(TokenFile(empty, 256), Contains("empty"));
}

TEST_CASE("token sampler: targets are the next tokens; windows are reproducible", "[io][tokens]") {
  const std::string p = temp_path("seq.bin");
  std::vector<uint16_t> toks(1000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t(i % 997);  // value == position (mostly)
  write_token_file(p, toks);
  TokenFile f(p, 1000);
  auto at = [&](int64_t i) { return int32_t(toks[size_t(i)]); };
  TokenSampler rnd(f, 4, 16, TokenSampler::Order::random, 42);
  Tensor x = Tensor::empty({4, 16}, DType::i32), y = Tensor::empty({4, 16}, DType::i32);
  Tensor x2 = Tensor::empty({4, 16}, DType::i32), y2 = Tensor::empty({4, 16}, DType::i32);
  rnd.batch(3, x, y);
  rnd.batch(3, x2, y2);
  CHECK(test::values(x) == test::values(x2));
  const int32_t* xs = x.data<int32_t>();
  const int32_t* ys = y.data<int32_t>();
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t t = 0; t < 16; ++t) {
      CHECK(ys[b * 16 + t] == at(xs[b * 16] + t + 1));  // token after the window's t-th
      CHECK(xs[b * 16 + t] == at(xs[b * 16] + t));
    }
  rnd.batch(4, x2, y2);
  CHECK(test::values(x) != test::values(x2));  // another step, other windows

  TokenSampler seq(f, 2, 10, TokenSampler::Order::sequential, 0);
  Tensor sx = Tensor::empty({2, 10}, DType::i32), sy = Tensor::empty({2, 10}, DType::i32);
  seq.batch(1, sx, sy);  // windows 2 and 3: tokens 20..29 and 30..39
  CHECK(sx.data<int32_t>()[0] == 20);
  CHECK(sx.data<int32_t>()[10] == 30);
  CHECK(sy.data<int32_t>()[19] == 40);
  CHECK_THROWS_WITH(TokenSampler(f, 1, 1000, TokenSampler::Order::random, 0), Contains("seq.bin"));
}

TEST_CASE("token file: a file cut, or cut and grown back, under a reader is an error, never zeros",
          "[io][tokens][errors]") {
  const std::string p = temp_path("cut.bin");
  std::vector<uint16_t> toks(4096);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t(1 + i % 250);  // no zeros: zeros would be the damage
  write_token_file(p, toks);
  // An hour old, so the truncation below is a later modification time whatever the clock's grain.
  fs::last_write_time(p, fs::last_write_time(p) - std::chrono::hours(1));
  TokenFile f(p, 256);
  std::vector<uint16_t> out(64);
  f.read(4000, 64, out.data());
  CHECK(out == std::vector<uint16_t>(toks.begin() + 4000, toks.begin() + 4064));
  SECTION("cut and grown back to its size (truncate -s 1000; truncate -s 8192)") {
    fs::resize_file(p, 1000);
    fs::resize_file(p, 8192);
    CHECK_THROWS_WITH(f.read(4000, 64, out.data()),
                      Contains("cut.bin: the file was modified since it was opened") && Contains("size 8192 -> 8192"));
    TokenSampler s(f, 2, 8, TokenSampler::Order::random, 1);
    Tensor x = Tensor::empty({2, 8}, DType::i32), y = Tensor::empty({2, 8}, DType::i32);
    CHECK_THROWS_WITH(s.batch(0, x, y), Contains("cut.bin: the file was modified since it was opened"));
  }
  SECTION("cut") {
    fs::resize_file(p, 1000);
    for (const int64_t at : {int64_t(4000), int64_t(0)})  // past the new end, and before it
      CHECK_THROWS_WITH(f.read(at, 64, out.data()), Contains("cut.bin: the file shrank from 8192 to 1000 bytes"));
  }
}

TEST_CASE("token file: an llm.c shard is recognised by its header and refused in one line", "[io][tokens][errors]") {
  const std::string p = temp_path("llmc_train_000000.bin");
  std::vector<uint16_t> file(512 + 100, 7);  // 256 int32s of header, then 100 tokens
  const int32_t head[3] = {20240520, 1, 100};
  std::memcpy(file.data(), head, sizeof head);
  write_token_file(p, file);
  // Read as tokens its magic's low half would be id 55240: inside a vocabulary of 65536.
  CHECK_THROWS_WITH(TokenFile(p, 65536), Contains("llmc_train_000000.bin: an llm.c token shard (a 1024-byte header: "
                                                  "magic 20240520, version 1, 100 tokens)") &&
                                             Contains("tail -c +1025"));
}
