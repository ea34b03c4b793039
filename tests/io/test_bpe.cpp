// GPT-2's byte-level BPE (io/bpe.h) on vocabularies made here: the
// pre-tokenizer's pieces against splits worked out by hand from GPT-2's
// pattern; the merge loop (both its short and long-piece paths) against a
// plain spelling of tiktoken's rule; Hugging Face's pair rule where it differs;
// special tokens; bad files refused in one line. The real vocabulary is
// checked against tiktoken itself in tests/cli/test_tokenizer_cli.sh.
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "base/error.h"
#include "io/bpe.h"
#include "io/gpt2_pretokenize.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::text;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string temp_file(const std::string& name, const std::string& content) {
  const fs::path dir = fs::temp_directory_path() / "engine_test_bpe";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << content;
  return p.string();
}

std::string base64(const std::string& s) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t w = uint32_t(uint8_t(s[i])) << 16;
    if (i + 1 < s.size()) w |= uint32_t(uint8_t(s[i + 1])) << 8;
    if (i + 2 < s.size()) w |= uint32_t(uint8_t(s[i + 2]));
    out += k[w >> 18 & 63];
    out += k[w >> 12 & 63];
    out += i + 1 < s.size() ? k[w >> 6 & 63] : '=';
    out += i + 2 < s.size() ? k[w & 63] : '=';
  }
  return out;
}

// A ranks file: the 256 bytes, then the given tokens in rank order.
std::string ranks_file(const std::string& name, const std::vector<std::string>& merged) {
  std::string text;
  for (int b = 0; b < 256; ++b) text += base64(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
  for (size_t i = 0; i < merged.size(); ++i) text += base64(merged[i]) + " " + std::to_string(256 + i) + "\n";
  return temp_file(name, text);
}

// tiktoken's rule spelled plainly: merge the leftmost lowest-ranked pair
// whose concatenation is a token, until none is.
std::vector<int> naive_bpe(const std::map<std::string, int>& ranks, const std::string& piece) {
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  for (;;) {
    int best = -1, best_rank = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && (best < 0 || it->second < best_rank)) best = int(i), best_rank = it->second;
    }
    if (best < 0) break;
    parts[size_t(best)] += parts[size_t(best) + 1];
    parts.erase(parts.begin() + best + 1);
  }
  std::vector<int> ids;
  for (const auto& p : parts) ids.push_back(ranks.at(p));
  return ids;
}

std::vector<std::string> pieces(const std::string& s) {
  std::vector<std::string> out;
  for (auto p : gpt2_pieces(s)) out.emplace_back(p);
  return out;
}

}  // namespace

TEST_CASE("bpe: GPT-2's pre-tokenizer splits as its pattern does", "[io][bpe]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("it's I'll we've 'S") == V{"it", "'s", " I", "'ll", " we", "'ve", " '", "S"});
  CHECK(pieces("a  b") == V{"a", " ", " b"});
  CHECK(pieces("a\n\nb") == V{"a", "\n", "\n", "b"});
  CHECK(pieces("\t x") == V{"\t", " x"});
  CHECK(pieces("end   ") == V{"end", "   "});
  CHECK(pieces("  x") == V{" ", " x"});
  CHECK(pieces(" ") == V{" "});
  CHECK(pieces(" 123abc") == V{" 123", "abc"});
  CHECK(pieces("x!!?y") == V{"x", "!!?", "y"});
  CHECK(pieces("\xe6\x97\xa5\xe6\x9c\xac \xe8\xaa\x9e") == V{"\xe6\x97\xa5\xe6\x9c\xac", " \xe8\xaa\x9e"});  // 日本 語
  CHECK(pieces("caf\xc3\xa9!") == V{"caf\xc3\xa9", "!"});
  // Bytes that are not UTF-8 are "other" characters, one byte each.
  CHECK(pieces("a\xff b") == V{"a", "\xff", " b"});
  CHECK(pieces("a \xff\x80!b") == V{"a", " \xff\x80!", "b"});
  CHECK(pieces("\xe2\x82x") == V{"\xe2\x82", "x"});  // a cut 3-byte sequence
  // U+3000 is white space, U+001C is not (Unicode's White_Space, not str.isspace).
  CHECK(pieces("a\xe3\x80\x80\xe3\x80\x80"
               "b") == V{"a", "\xe3\x80\x80", "\xe3\x80\x80", "b"});
  CHECK(pieces("a\x1c"
               "b") == V{"a", "\x1c", "b"});
}

TEST_CASE("bpe: merges as tiktoken's rule, short and long pieces", "[io][bpe]") {
  // Random merges over "abcd": each a concatenation of two tokens already there.
  std::mt19937 rng(7);
  std::vector<std::string> toks = {"a", "b", "c", "d"}, merged;
  std::map<std::string, int> ranks;
  for (int b = 0; b < 256; ++b) ranks[std::string(1, char(b))] = b;
  while (merged.size() < 300) {
    const std::string t = toks[rng() % toks.size()] + toks[rng() % toks.size()];
    if (ranks.count(t) || t.size() > 12) continue;
    ranks[t] = 256 + int(merged.size());
    merged.push_back(t);
    toks.push_back(t);
  }
  const Bpe bpe = Bpe::load_tiktoken(ranks_file("abcd.tiktoken", merged));
  CHECK(bpe.vocab_size() == 257 + 300);
  CHECK(bpe.eot() == 556);
  for (size_t len : {1, 2, 3, 7, 63, 64, 65, 100, 257, 1000}) {
    for (int rep = 0; rep < 5; ++rep) {
      std::string s;
      for (size_t i = 0; i < len; ++i) s += char('a' + rng() % 4);
      INFO("length " << len << ": " << s);
      CHECK(bpe.encode(s) == naive_bpe(ranks, s));
      CHECK(bpe.decode(bpe.encode(s)) == s);
    }
  }
}

TEST_CASE("bpe: ties merge the leftmost pair; Hugging Face's pair rule where it differs", "[io][bpe]") {
  const Bpe tk = Bpe::load_tiktoken(ranks_file("abc.tiktoken", {"aa", "bc", "ab", "abc"}));
  CHECK(tk.encode("aaa") == std::vector<int>{256, 'a'});  // leftmost of two equal pairs
  CHECK(tk.encode("aaaa") == std::vector<int>{256, 256});
  CHECK(tk.encode("abc") == std::vector<int>{259});  // bc first, then a+bc is a token
  // The same tokens, but merges.txt lists "ab c", not "a bc": the pair rule keeps a, bc.
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = gpt2_byte_char(static_cast<unsigned char>(b));
    std::string spelled;
    if (cp < 0x80)
      spelled = std::string(1, char(cp));
    else
      spelled = {char(0xC0 | cp >> 6), char(0x80 | (cp & 0x3F))};
    if (spelled == "\"" || spelled == "\\") spelled = "\\" + spelled;
    vocab += "\"" + spelled + "\": " + std::to_string(b) + ", ";
  }
  vocab += "\"aa\": 256, \"bc\": 257, \"ab\": 258, \"abc\": 259, \"<|endoftext|>\": 260}";
  const std::string dir = (fs::temp_directory_path() / "engine_test_bpe" / "hf").string();
  fs::create_directories(dir);
  temp_file("hf/vocab.json", vocab);
  temp_file("hf/merges.txt", "#version: 0.2\na a\nb c\na b\nab c\n");
  const Bpe hf = Bpe::load(dir);
  CHECK(hf.vocab_size() == 261);
  CHECK(hf.eot() == 260);
  CHECK(hf.encode("aaa") == std::vector<int>{256, 'a'});
  CHECK(hf.encode("abc") == std::vector<int>{'a', 257});
  CHECK(hf.encode("ab abc") == std::vector<int>{258, ' ', 'a', 257});
}

TEST_CASE("bpe: <|endoftext|> is text unless allowed; decode checks ids", "[io][bpe]") {
  const Bpe bpe = Bpe::load_tiktoken(ranks_file("plain.tiktoken", {}));
  const std::string s = "x<|endoftext|>y";
  std::vector<int> plain;
  bpe.encode_ordinary(s, plain);
  CHECK(plain.size() == s.size());  // every byte its own token here
  const std::vector<int> special = bpe.encode(s, true);
  CHECK(special == std::vector<int>{'x', 256, 'y'});
  CHECK(bpe.decode(special) == s);
  CHECK_THROWS_WITH(bpe.decode({65, 257}), Contains("token id 257 is outside the tokenizer's vocabulary of 257"));
  // Every byte string survives encode and decode.
  std::mt19937 rng(3);
  std::string bytes;
  for (int i = 0; i < 2000; ++i) bytes += char(rng() % 256);
  CHECK(bpe.decode(bpe.encode(bytes)) == bytes);
}

TEST_CASE("bpe: bad vocabulary files refused in one line", "[io][bpe]") {
  auto fails = [](const std::string& path, const std::string& what) {
    CHECK_THROWS_WITH(Bpe::load(path), Contains(what));
  };
  fails(temp_file("bad64.tiktoken", "YQ== 0\nnot*base64 1\n"), "bad64.tiktoken:2: expected 'BASE64 RANK'");
  fails(temp_file("norank.tiktoken", "YQ==\n"), "norank.tiktoken:1: expected 'BASE64 RANK'");
  fails(temp_file("twice.tiktoken", "YQ== 0\nYg== 0\n"), "twice.tiktoken:2: rank 0 given twice");
  fails(temp_file("gap.tiktoken", "YQ== 0\nYg== 2\n"), "gap.tiktoken: no token has rank 1");
  fails(temp_file("bytes.tiktoken", "YQ== 0\nYg== 1\n"), "bytes.tiktoken: byte 0x0 has no token");
  fails(temp_file("empty.tiktoken", ""), "empty.tiktoken: no tokens");
  fails("/nonexistent/gpt2.tiktoken", "/nonexistent/gpt2.tiktoken: cannot open");
  const std::string dir = (fs::temp_directory_path() / "engine_test_bpe" / "badhf").string();
  fs::create_directories(dir);
  temp_file("badhf/vocab.json", "{\"a\": 0,");
  fails(dir, "vocab.json: not JSON");
  temp_file("badhf/vocab.json", "{\"a\": 5}");
  fails(dir, "vocab.json: token \"a\" has id 5; ids must be 0 .. 0");
  temp_file("badhf/vocab.json", "{\"a b\": 0}");
  fails(dir, "has a character outside GPT-2's byte-to-unicode table");
}
