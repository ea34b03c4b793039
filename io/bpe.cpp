// Byte-level BPE: loading the two vocabulary formats, the merge loop, and
// encode/decode (see bpe.h for the rules).
// The merge loop is tiktoken's: every byte a part, then repeatedly the
// adjacent pair of lowest rank merged (the leftmost of equal ranks). A piece
// of up to kShortPiece bytes is scanned in arrays on the stack (quadratic in
// its length, fastest for the words most pieces are); a longer one (a run of
// thousands of letters or spaces) keeps its pairs in a heap, n log n.
#include "io/bpe.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "base/error.h"
#include "io/gpt2_pretokenize.h"
#include "io/unicode_class.h"

namespace eng::text {
namespace {

constexpr size_t kShortPiece = 64;
constexpr int64_t kNoMerge = std::numeric_limits<int64_t>::max();

uint64_t hash_bytes(std::string_view s) {  // FNV-1a, then a final mix
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h ^ (h >> 29);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(cat(path, ": cannot open the tokenizer file"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Standard base64 with '=' padding; false on any other character.
bool base64_decode(std::string_view in, std::string& out) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4], pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + size_t(k)];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad) return false;  // data after padding
        v[k] = val(c);
        if (v[k] < 0) return false;
      }
    }
    const uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(char(w >> 16));
    if (pad < 2) out.push_back(char(w >> 8 & 0xFF));
    if (pad < 1) out.push_back(char(w & 0xFF));
  }
  return true;
}

bool is_special_spelling(std::string_view s) {
  return s.size() >= 4 && s.substr(0, 2) == "<|" && s.substr(s.size() - 2) == "|>";
}

}  // namespace

uint32_t gpt2_byte_char(unsigned char b) {
  // Printable bytes stand for themselves; the other 68, in byte order, for
  // U+0100 onwards (so no token string holds a space or a control byte).
  auto printable = [](unsigned c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE; };
  if (printable(b)) return b;
  uint32_t n = 0;
  for (unsigned c = 0; c < b; ++c) n += !printable(c);
  return 256 + n;
}

void Bpe::build_table() {
  uint64_t cap = 16;
  while (cap < 2 * bytes_.size()) cap *= 2;
  table_.slot.assign(cap, -1);
  table_.mask = cap - 1;
  specials_.clear();
  for (int id = 0; id < int(bytes_.size()); ++id) {
    if (special_[size_t(id)]) {
      specials_.push_back(id);
      continue;
    }
    const std::string& b = bytes_[size_t(id)];
    const int dup = find(b);
    if (dup >= 0)
      throw UserError(cat(source_, ": tokens ", dup, " and ", id, " are the same bytes; each token must be unique"));
    uint64_t h = hash_bytes(b) & table_.mask;
    while (table_.slot[h] >= 0) h = (h + 1) & table_.mask;
    table_.slot[h] = id;
  }
  for (int c = 0; c < 256; ++c) {
    byte_id_[c] = find(std::string_view(std::string(1, char(c))));
    if (byte_id_[c] < 0)
      throw UserError(
          cat(source_, ": byte 0x", std::hex, c, " has no token; a byte-level BPE needs all 256 bytes as tokens"));
  }
}

int Bpe::find(std::string_view b) const {
  if (table_.slot.empty()) return -1;
  for (uint64_t h = hash_bytes(b) & table_.mask;; h = (h + 1) & table_.mask) {
    const int id = table_.slot[h];
    if (id < 0) return -1;
    if (bytes_[size_t(id)] == b) return id;
  }
}

bool Bpe::merge_rank(std::string_view ab, int a, int b, int64_t& rank, int& merged) const {
  if (pair_rule_) {
    const auto it = pairs_.find(uint64_t(uint32_t(a)) << 32 | uint32_t(b));
    if (it == pairs_.end()) return false;
    rank = it->second.first;
    merged = it->second.second;
    return true;
  }
  const int id = find(ab);
  if (id < 0) return false;
  rank = id;
  merged = id;
  return true;
}

void Bpe::encode_piece(std::string_view piece, std::vector<int>& out) const {
  const size_t n = piece.size();
  if (!pair_rule_) {  // most pieces are one token: tiktoken's shortcut
    const int id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  auto byte_of = [&](size_t k) { return byte_id_[static_cast<unsigned char>(piece[k])]; };
  if (n <= kShortPiece) {
    // Parts [start[k], start[k+1]); rank[k] / merged[k]: of parts k and k+1.
    std::array<uint32_t, kShortPiece + 1> start;
    std::array<int, kShortPiece> id, merged;
    std::array<int64_t, kShortPiece> rank;
    size_t m = n;
    for (size_t k = 0; k < n; ++k) start[k] = uint32_t(k), id[k] = byte_of(k);
    start[n] = uint32_t(n);
    auto rate = [&](size_t k) {  // parts k and k+1 (k + 1 < m)
      if (!merge_rank(piece.substr(start[k], start[k + 2] - start[k]), id[k], id[k + 1], rank[k], merged[k]))
        rank[k] = kNoMerge;
    };
    for (size_t k = 0; k + 1 < m; ++k) rate(k);
    while (m > 1) {
      size_t best = 0;
      for (size_t k = 1; k + 1 < m; ++k)
        if (rank[k] < rank[best]) best = k;
      if (rank[best] == kNoMerge) break;
      id[best] = merged[best];
      for (size_t k = best + 1; k + 1 < m; ++k) {  // drop part best + 1
        id[k] = id[k + 1];
        start[k] = start[k + 1];
        if (k + 2 < m) rank[k] = rank[k + 1], merged[k] = merged[k + 1];  // pairs: one fewer than parts
      }
      start[m - 1] = start[m];
      --m;
      if (best > 0) rate(best - 1);
      if (best + 1 < m) rate(best);
    }
    for (size_t k = 0; k < m; ++k) out.push_back(id[k]);
    return;
  }
  // Long pieces: parts as a linked list by start byte, candidate pairs in a
  // min-heap of (rank, left start); an entry is stale once either part changed.
  std::vector<uint32_t> next(n), prev(n);
  std::vector<int> id(n);
  std::vector<uint8_t> alive(n, 1);
  for (size_t k = 0; k < n; ++k) next[k] = uint32_t(k + 1), prev[k] = uint32_t(k ? k - 1 : n), id[k] = byte_of(k);
  struct Cand {
    int64_t rank;
    uint32_t left, right, end;
    int merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](uint32_t l) {  // the pair of part l and its successor
    const uint32_t r = next[l];
    if (r >= n) return;
    Cand c{0, l, r, next[r], 0};
    if (merge_rank(piece.substr(l, c.end - l), id[l], id[r], c.rank, c.merged)) heap.push(c);
  };
  for (uint32_t k = 0; k + 1 < n; ++k) push(k);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || next[c.right] != c.end) continue;
    id[c.left] = c.merged;
    alive[c.right] = 0;
    next[c.left] = c.end;
    if (c.end < n) prev[c.end] = c.left;
    if (prev[c.left] < n) push(prev[c.left]);
    push(c.left);
  }
  for (uint32_t k = 0; k < n; k = next[k]) out.push_back(id[k]);
}

void Bpe::encode_ordinary(std::string_view text, std::vector<int>& out) const {
  for (size_t i = 0; i < text.size();) {
    const size_t len = gpt2_piece_length(text, i);
    encode_piece(text.substr(i, len), out);
    i += len;
  }
}

std::vector<int> Bpe::encode(std::string_view text, bool allow_special) const {
  std::vector<int> out;
  if (!allow_special) {
    encode_ordinary(text, out);
    return out;
  }
  std::vector<size_t> next;  // each special's next occurrence at or after i (npos: none)
  for (int id : specials_) next.push_back(text.find(bytes_[size_t(id)]));
  size_t i = 0;
  while (i < text.size()) {
    size_t at = std::string_view::npos;
    int which = -1;
    for (size_t s = 0; s < specials_.size(); ++s) {
      if (next[s] != std::string_view::npos && next[s] < i) next[s] = text.find(bytes_[size_t(specials_[s])], i);
      if (next[s] < at) at = next[s], which = specials_[s];
    }
    encode_ordinary(text.substr(i, at == std::string_view::npos ? std::string_view::npos : at - i), out);
    if (which < 0) break;
    out.push_back(which);
    i = at + bytes_[size_t(which)].size();
  }
  return out;
}

const std::string& Bpe::token_bytes(int id) const {
  if (id < 0 || id >= vocab_size())
    throw UserError(
        cat("token id ", id, " is outside the tokenizer's vocabulary of ", vocab_size(), " (", source_, ")"));
  return bytes_[size_t(id)];
}

std::string Bpe::decode(const std::vector<int>& ids) const {
  std::string s;
  for (int id : ids) s += token_bytes(id);
  return s;
}

namespace {

// The inverse: GPT-2's spelling back to bytes; false for a character the table lacks.
bool unspell(const std::string& spelled, std::string& bytes) {
  static const std::array<int, 512> byte_of = [] {  // gpt2_byte_char's code points are < 512
    std::array<int, 512> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[gpt2_byte_char(static_cast<unsigned char>(b))] = b;
    return t;
  }();
  bytes.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(spelled.data());
  for (size_t i = 0; i < spelled.size();) {
    uint32_t cp;
    i += decode_utf8(p + i, spelled.size() - i, cp);
    if (cp >= 512 || byte_of[cp] < 0) return false;
    bytes.push_back(char(byte_of[cp]));
  }
  return true;
}

std::string spell(const std::string& bytes) {  // bytes through GPT-2's byte-to-unicode table, as UTF-8
  std::string s;
  for (unsigned char b : bytes) {
    const uint32_t cp = gpt2_byte_char(b);
    if (cp < 0x80)
      s.push_back(char(cp));
    else
      s.push_back(char(0xC0 | cp >> 6)), s.push_back(char(0x80 | (cp & 0x3F)));
  }
  return s;
}

}  // namespace

std::string Bpe::hf_vocab_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (int id = 0; id < vocab_size(); ++id)
    j[special_[size_t(id)] ? bytes_[size_t(id)] : spell(bytes_[size_t(id)])] = id;
  return j.dump() + "\n";
}

std::string Bpe::hf_merges_txt() const {
  std::string out = "#version: 0.2\n";
  if (pair_rule_) {
    for (const auto& [l, r] : merges_) out += spell(bytes_[size_t(l)]) + " " + spell(bytes_[size_t(r)]) + "\n";
    return out;
  }
  // Each token of two bytes or more, in rank order: merge its bytes as the
  // encoder would, with only the ranks below its own, down to one pair.
  for (int id = 0; id < vocab_size(); ++id) {
    const std::string& tok = bytes_[size_t(id)];
    if (special_[size_t(id)] || tok.size() < 2) continue;
    std::vector<std::string> parts;
    for (char c : tok) parts.emplace_back(1, c);
    while (parts.size() > 2) {
      int best = -1, best_rank = id;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const int r = find(parts[i] + parts[i + 1]);
        if (r >= 0 && r < best_rank) best = int(i), best_rank = r;
      }
      if (best < 0) break;
      parts[size_t(best)] += parts[size_t(best) + 1];
      parts.erase(parts.begin() + best + 1);
    }
    if (parts.size() != 2 || find(parts[0]) < 0 || find(parts[1]) < 0 || find(parts[0]) >= id || find(parts[1]) >= id)
      throw UserError(
          cat(source_, ": token ", id, " is not the merge of two lower-ranked tokens; it has no merges.txt line"));
    out += spell(parts[0]) + " " + spell(parts[1]) + "\n";
  }
  return out;
}

Bpe Bpe::load(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path))
    return load_hf((fs::path(path) / "vocab.json").string(), (fs::path(path) / "merges.txt").string());
  return load_tiktoken(path);
}

Bpe Bpe::load_tiktoken(const std::string& path) {
  Bpe t;
  t.source_ = path;
  const std::string text = read_all(path);
  std::vector<std::string> by_rank;
  std::vector<uint8_t> seen;
  std::istringstream in(text);
  std::string line, bytes;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    char* end = nullptr;
    const long long rank = sp == std::string::npos ? -1 : std::strtoll(line.c_str() + sp + 1, &end, 10);
    if (sp == std::string::npos || end == line.c_str() + sp + 1 || *end != '\0' || rank < 0 || rank > 10'000'000 ||
        !base64_decode(std::string_view(line).substr(0, sp), bytes))
      throw UserError(cat(path, ":", no, ": expected 'BASE64 RANK' (a tiktoken ranks file such as gpt2.tiktoken)"));
    if (size_t(rank) >= by_rank.size()) by_rank.resize(size_t(rank) + 1), seen.resize(size_t(rank) + 1);
    if (seen[size_t(rank)]) throw UserError(cat(path, ":", no, ": rank ", rank, " given twice"));
    seen[size_t(rank)] = 1;
    by_rank[size_t(rank)] = bytes;
  }
  for (size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) throw UserError(cat(path, ": no token has rank ", r, "; ranks must be 0, 1, 2, ... without gaps"));
  if (by_rank.empty()) throw UserError(cat(path, ": no tokens (an empty ranks file)"));
  t.bytes_ = std::move(by_rank);
  t.special_.assign(t.bytes_.size(), 0);
  t.eot_ = int(t.bytes_.size());
  t.bytes_.push_back("<|endoftext|>");
  t.special_.push_back(1);
  t.build_table();
  return t;
}

Bpe Bpe::load_hf(const std::string& vocab_json, const std::string& merges_txt) {
  Bpe t;
  t.source_ = vocab_json;
  t.pair_rule_ = true;
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(read_all(vocab_json));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(cat(vocab_json, ": not JSON (", e.what(), ")"));
  }
  if (!vocab.is_object())
    throw UserError(cat(vocab_json, ": expected an object of token -> id (Hugging Face's vocab.json)"));
  t.bytes_.assign(vocab.size(), std::string());
  t.special_.assign(vocab.size(), 0);
  std::vector<uint8_t> seen(vocab.size(), 0);
  for (const auto& [key, val] : vocab.items()) {
    if (!val.is_number_integer() || val.get<int64_t>() < 0 || val.get<int64_t>() >= int64_t(vocab.size()))
      throw UserError(
          cat(vocab_json, ": token \"", key, "\" has id ", val.dump(), "; ids must be 0 .. ", vocab.size() - 1));
    const size_t id = val.get<size_t>();
    if (seen[id]) throw UserError(cat(vocab_json, ": id ", id, " given twice"));
    seen[id] = 1;
    if (is_special_spelling(key)) {
      t.bytes_[id] = key;
      t.special_[id] = 1;
      if (key == "<|endoftext|>") t.eot_ = int(id);
      continue;
    }
    if (!unspell(key, t.bytes_[id]))
      throw UserError(
          cat(vocab_json, ": token \"", key,
              "\" has a character outside GPT-2's byte-to-unicode table (not a byte-level BPE vocabulary)"));
  }
  t.build_table();
  std::istringstream in(read_all(merges_txt));
  std::string line;
  int64_t priority = 0;
  for (int64_t no = 1; std::getline(in, line); ++no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
      throw UserError(
          cat(merges_txt, ":", no, ": expected 'LEFT RIGHT' (one merge a line, as Hugging Face's merges.txt)"));
    auto token_of = [&](const std::string& spelled) {
      std::string bytes;
      const int id = unspell(spelled, bytes) ? t.find(bytes) : -1;
      if (id < 0) throw UserError(cat(merges_txt, ":", no, ": \"", spelled, "\" is not a token of ", vocab_json));
      return id;
    };
    const int l = token_of(line.substr(0, sp)), r = token_of(line.substr(sp + 1)),
              lr = token_of(line.substr(0, sp) + line.substr(sp + 1));
    t.pairs_.emplace(uint64_t(uint32_t(l)) << 32 | uint32_t(r), std::make_pair(priority++, lr));
    t.merges_.emplace_back(l, r);
  }
  return t;
}

}  // namespace eng::text
