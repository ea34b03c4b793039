// GPT-2's pre-tokenizer: the text cut into the pieces BPE then merges within,
// as the pattern GPT-2 was trained with splits it,
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (tiktoken's r50k pattern is the same split written with possessive
// quantifiers). Written out by hand instead of run by a regex engine: each
// alternative is a run of one character class (io/unicode_class.h), so one
// forward scan finds the piece, with no backtracking.
// In words: a contraction; else an optional space and then a run of letters,
// of digits, or of other characters; else a run of white space, less its last
// character when a non-space follows (that character leads the next piece,
// " world"), all of it at the end of the text or when it is one character.
// Bytes that are not UTF-8 are characters of class Other (decode_utf8), so
// every byte of the text is in exactly one piece.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace eng::text {

// Length in bytes of the piece that starts at text[i] (i < text.size()).
size_t gpt2_piece_length(std::string_view text, size_t i);

// All pieces of text, in order (their concatenation is text).
std::vector<std::string_view> gpt2_pieces(std::string_view text);

}  // namespace eng::text
