// The character classes GPT-2's pre-tokenizer pattern tells apart, for one
// code point, and UTF-8 decoding that never fails.
// Letter is \p{L} (Lu Ll Lt Lm Lo), Number is \p{N} (Nd Nl No), both from
// io/unicode_tables.inc (generated from Python's unicodedata; its header says
// which Unicode version). Space is Unicode's White_Space property, the \s of
// the regex engine tiktoken runs (Rust's regex crate): 25 code points, so
// U+001C..U+001F, which Python's str.isspace() calls space, are Other here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace eng::text {

enum class CharClass : uint8_t { Letter, Number, Space, Other };

CharClass char_class(uint32_t cp);

// A byte that does not start a well-formed UTF-8 sequence (a stray
// continuation byte, an overlong form, a surrogate, a truncated sequence,
// beyond U+10FFFF) decodes as itself, one byte long, to this code point, of
// class Other: text that is not UTF-8 still splits, and every byte is kept.
constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

// Decodes the code point at p (n > 0 bytes left); returns its length in bytes.
inline size_t decode_utf8(const unsigned char* p, size_t n, uint32_t& cp) {
  const unsigned c = p[0];
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    v = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    v = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    v = c & 0x07;
    min = 0x10000;
  } else {
    cp = kInvalidCodePoint;
    return 1;
  }
  if (len > n) {
    cp = kInvalidCodePoint;
    return 1;
  }
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) {
      cp = kInvalidCodePoint;
      return 1;
    }
    v = (v << 6) | (p[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    cp = kInvalidCodePoint;
    return 1;
  }
  cp = v;
  return len;
}

}  // namespace eng::text
