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
// Token ids as TokenFile::read gives them.
template <typename T>
std::vector<int32_t> ids(const std::vector<T>& v) {
  return std::vector<int32_t>(v.begin(), v.end());
}
template <typename It>
std::vector<int32_t> ids(It a, It b) {
  return std::vector<int32_t>(a, b);
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
  std::vector<int32_t> back(100);
  f.read(0, 100, back.data());
  CHECK(back == ids(toks));
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
  std::vector<int32_t> out(64);
  f.read(4000, 64, out.data());
  CHECK(out == ids(toks.begin() + 4000, toks.begin() + 4064));
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

TEST_CASE("token file: llm.c shards, alone, by a glob or a directory, read as one sequence", "[io][tokens]") {
  const fs::path dir = fs::path(temp_path("shards"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // 3 shards of 100, 37 and 250 tokens; value = position in the whole % 251.
  std::vector<uint16_t> all(387);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i % 251);
  const size_t cut[4] = {0, 100, 137, 387};
  for (int i = 0; i < 3; ++i)
    write_token_file((dir / cat("x_train_00000", i, ".bin")).string(),
                     std::vector<uint16_t>(all.begin() + long(cut[i]), all.begin() + long(cut[i + 1])), true);
  write_token_file((dir / "x_val_000000.bin").string(), {1, 2, 3}, true);
  // The header as llm.c's data_common.py writes it: 256 int32s, then the tokens.
  const std::string one = (dir / "x_train_000001.bin").string();
  CHECK(fs::file_size(one) == 1024 + 2 * 37);
  std::ifstream in(one, std::ios::binary);
  int32_t head[3];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  CHECK((head[0] == 20240520 && head[1] == 1 && head[2] == 37));

  const TokenFile single(one, 256);
  REQUIRE(single.size() == 37);
  std::vector<int32_t> got(37);
  single.read(0, 37, got.data());
  CHECK(got == ids(all.begin() + 100, all.begin() + 137));
  CHECK(single.describe() == one + " (37 tokens, an llm.c shard)");

  const TokenFile glob((dir / "x_train_*.bin").string(), 256);
  REQUIRE(glob.size() == 387);
  CHECK_THAT(glob.describe(), Contains("x_train_*.bin: 3 files, 387 tokens (llm.c shards)"));
  std::vector<int32_t> whole(387);
  glob.read(0, 387, whole.data());
  CHECK(whole == ids(all));
  // A range across all three files' boundaries.
  std::vector<int32_t> mid(60);
  glob.read(90, 60, mid.data());
  CHECK(mid == ids(all.begin() + 90, all.begin() + 150));

  // A directory: every *.bin in name order; not llm.c's train and val shards together.
  CHECK_THROWS_WITH(TokenFile(dir.string(), 256),
                    Contains("shards: holds both *_train_* and *_val_* shards") && Contains("shards/*_train_*.bin"));
  const fs::path only = fs::path(temp_path("only"));
  fs::remove_all(only);
  fs::create_directories(only);
  write_token_file((only / "b.bin").string(), {3, 4});  // written first, read second
  write_token_file((only / "a.bin").string(), {1, 2}, true);
  std::ofstream((only / "notes.txt").string()) << "not tokens";
  const TokenFile d(only.string(), 256);
  std::vector<int32_t> four(4);
  d.read(0, 4, four.data());
  CHECK(four == std::vector<int32_t>{1, 2, 3, 4});
  // A file whose name has a glob character is the file, not a pattern.
  const std::string bracket = temp_path("run[1].bin");
  write_token_file(bracket, {5, 6, 7});
  CHECK(TokenFile(bracket, 256).size() == 3);

  // The sampler's windows over the shards are the windows over their concatenation.
  const std::string flat = temp_path("flat.bin");
  write_token_file(flat, all);
  const TokenFile f(flat, 256);
  Tensor x1 = Tensor::empty({3, 20}, DType::i32), y1 = Tensor::empty({3, 20}, DType::i32);
  Tensor x2 = Tensor::empty({3, 20}, DType::i32), y2 = Tensor::empty({3, 20}, DType::i32);
  for (int64_t step : {0, 5, 9}) {
    TokenSampler(glob, 3, 20, TokenSampler::Order::random, 7).batch(step, x1, y1);
    TokenSampler(f, 3, 20, TokenSampler::Order::random, 7).batch(step, x2, y2);
    CHECK(test::values(x1) == test::values(x2));
    CHECK(test::values(y1) == test::values(y2));
  }
}

TEST_CASE("token file: Llama 3's llm.c shards hold uint32 ids past 65,535", "[io][tokens]") {
  const std::string p = temp_path("llama3_000000.bin");
  const std::vector<uint32_t> toks{0, 70000, 128255, 5, 65536, 65535};
  write_token_file_u32(p, toks);
  CHECK(fs::file_size(p) == 1024 + 4 * toks.size());
  std::ifstream in(p, std::ios::binary);
  int32_t head[3];
  in.read(reinterpret_cast<char*>(head), sizeof head);
  CHECK((head[0] == 20240801 && head[1] == 7 && head[2] == 6));  // llm.c's dev/data/data_common.py llama-3
  const TokenFile f(p, 128256);
  CHECK(f.size() == 6);
  std::vector<int32_t> got(4);
  f.read(1, 4, got.data());
  CHECK(got == std::vector<int32_t>{70000, 128255, 5, 65536});
  CHECK_THROWS_WITH(TokenFile(p, 100000), Contains("token id 128255 at position 2 is outside the vocabulary"));
  // A uint16 shard and a uint32 one read as one sequence.
  const std::string q = temp_path("gpt2_000001.bin");
  write_token_file(q, {9, 8}, true);
  const fs::path dir = fs::path(temp_path("mixed"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(p, dir / "a_000000.bin");
  fs::copy_file(q, dir / "a_000001.bin");
  const TokenFile both(dir.string(), 128256);
  std::vector<int32_t> all(8);
  both.read(0, 8, all.data());
  CHECK(all == std::vector<int32_t>{0, 70000, 128255, 5, 65536, 65535, 9, 8});
}

TEST_CASE("token file: a bad shard or an empty pattern is a named error", "[io][tokens][errors]") {
  const fs::path dir = fs::path(temp_path("bad_shards"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string p = (dir / "s_000000.bin").string();
  std::vector<uint16_t> toks(100, 7);
  write_token_file(p, toks, true);
  fs::resize_file(p, fs::file_size(p) - 2);  // cut: the header says 100
  CHECK_THROWS_WITH(TokenFile(p, 256), Contains("s_000000.bin: its llm.c header says 100 tokens (1224 bytes with the "
                                                "header), the file holds 1222 bytes"));
  // An unknown version of either magic.
  for (const int32_t version : {2, 7}) {
    write_token_file(p, toks, true);
    std::fstream io(p, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(4);
    io.write(reinterpret_cast<const char*>(&version), 4);
    io.close();
    CHECK_THROWS_WITH(TokenFile(p, 256), Contains("s_000000.bin: an llm.c shard header (magic 20240520) of unknown "
                                                  "version " +
                                                  std::to_string(version) + "; version 1 (uint16 tokens) is read"));
  }
  write_token_file_u32(p, {1, 2, 3});
  {
    std::fstream io(p, std::ios::binary | std::ios::in | std::ios::out);
    const int32_t version = 1;
    io.seekp(4);
    io.write(reinterpret_cast<const char*>(&version), 4);
  }
  CHECK_THROWS_WITH(TokenFile(p, 256), Contains("(magic 20240801) of unknown version 1; version 7 (uint32 tokens)"));
  // Token ids checked in every shard, the one at fault named.
  write_token_file(p, toks, true);
  write_token_file((dir / "s_000001.bin").string(), {1, 2, 300}, true);
  CHECK_THROWS_WITH(TokenFile((dir / "s_*.bin").string(), 256), Contains("s_000001.bin: token id 300 at position 2"));
  CHECK_THROWS_WITH(TokenFile((dir / "t_*.bin").string(), 256), Contains("t_*.bin: the pattern matches no file"));
  const fs::path empty = dir / "empty_dir";
  fs::create_directories(empty);
  CHECK_THROWS_WITH(TokenFile(empty.string(), 256), Contains("empty_dir: a directory with no *.bin token file"));
}
