// Byte-level BPE as GPT-2 tokenizes (encode and decode): the text cut into
// pieces by GPT-2's pre-tokenizer (io/gpt2_pretokenize.h), each piece's
// bytes merged, lowest merge rank first (the leftmost of equals), until no
// adjacent pair merges; the token ids of the parts are the piece's tokens.
// <|endoftext|> (50256 in GPT-2) is a special token: plain text never
// encodes to it (encode_ordinary, as tiktoken's and llm.c's data scripts),
// encode(text, true) turns its literal spelling into it, and a document
// boundary is written by the caller as eot().
//
// Two vocabulary formats:
// - tiktoken's ranks file (gpt2.tiktoken): one token a line, its bytes in
//   base64, a space, its rank; the rank is the id, and a pair merges when the
//   concatenation of its bytes is a token (tiktoken's rule). The special token
//   takes the id after the last rank.
// - Hugging Face's vocab.json (token string -> id, bytes spelled through
//   GPT-2's byte-to-unicode table) and merges.txt (one "left right" pair a
//   line, highest priority first): a pair merges when merges.txt lists it,
//   as the reference encoder and Hugging Face's do. Token strings of the form
//   <|...|> are special tokens.
// For GPT-2's own files the two rules give the same ids (tested).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace eng::text {

class Bpe {
 public:
  // A ranks file, or a directory holding vocab.json and merges.txt.
  static Bpe load(const std::string& path);
  static Bpe load_tiktoken(const std::string& path);
  static Bpe load_hf(const std::string& vocab_json, const std::string& merges_txt);

  int vocab_size() const { return int(bytes_.size()); }  // special tokens included
  int eot() const { return eot_; }                       // <|endoftext|>, -1 if none
  const std::string& source() const { return source_; }

  // Appends the tokens of text (special-token spellings are plain text).
  void encode_ordinary(std::string_view text, std::vector<int>& out) const;
  // With allow_special, "<|endoftext|>" (and any other special token's
  // spelling) in text becomes that token.
  std::vector<int> encode(std::string_view text, bool allow_special = false) const;
  // The bytes of the tokens, concatenated (a special token as its spelling).
  // An id outside the vocabulary is a UserError naming it.
  std::string decode(const std::vector<int>& ids) const;
  const std::string& token_bytes(int id) const;

  // Hugging Face's spelling of this vocabulary, what GPT2TokenizerFast and
  // AutoTokenizer read: vocab.json (token string -> id, in id order) and
  // merges.txt ("#version: 0.2", then one "left right" pair a line, by
  // rank). From a ranks file each merge is recovered as the one pair a
  // token's bytes reduce to under the lower ranks; a token that reduces to
  // none is an error naming it.
  std::string hf_vocab_json() const;
  std::string hf_merges_txt() const;

 private:
  // Token bytes -> id, open addressing (the encoder's one hot lookup).
  struct Table {
    std::vector<int32_t> slot;  // id of the token in each slot, -1 empty
    uint64_t mask = 0;
  };
  int find(std::string_view bytes) const;
  void build_table();
  void encode_piece(std::string_view piece, std::vector<int>& out) const;
  // Rank of merging parts a and b (adjacent in piece), and the merged id;
  // false when they do not merge.
  bool merge_rank(std::string_view ab, int a, int b, int64_t& rank, int& merged) const;

  std::vector<std::string> bytes_;  // by id
  std::vector<uint8_t> special_;    // by id
  std::vector<int> specials_;       // the special tokens' ids (build_table)
  Table table_;
  int byte_id_[256] = {};
  // Hugging Face's rule: (left id << 32 | right id) -> (priority, merged id).
  bool pair_rule_ = false;
  std::unordered_map<uint64_t, std::pair<int64_t, int>> pairs_;
  std::vector<std::pair<int, int>> merges_;  // Hugging Face's file: its pairs by priority
  int eot_ = -1;
  std::string source_;
};

// GPT-2's byte-to-unicode table (how vocab.json and merges.txt spell bytes):
// the code point that stands for each byte.
uint32_t gpt2_byte_char(unsigned char b);

}  // namespace eng::text
