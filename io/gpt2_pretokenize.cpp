#include "io/gpt2_pretokenize.h"

#include "io/unicode_class.h"

namespace eng::text {
namespace {

struct Char {
  size_t len;
  CharClass cls;
};

Char char_at(std::string_view s, size_t i) {
  uint32_t cp;
  const size_t len = decode_utf8(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i, cp);
  return {len, char_class(cp)};
}

// End of the run of characters of class c that starts at i.
size_t run_end(std::string_view s, size_t i, CharClass c) {
  while (i < s.size()) {
    const Char ch = char_at(s, i);
    if (ch.cls != c) break;
    i += ch.len;
  }
  return i;
}

}  // namespace

size_t gpt2_piece_length(std::string_view s, size_t i) {
  const size_t n = s.size();
  // 's 't 're 've 'm 'll 'd (case-sensitive, the ASCII apostrophe only).
  if (s[i] == '\'' && i + 1 < n) {
    const char c = s[i + 1];
    if (c == 's' || c == 'd' || c == 'm' || c == 't') return 2;
    if (i + 2 < n) {
      const char d = s[i + 2];
      if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e')) return 3;
    }
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the run's class is that of
  // the character after the optional space.
  const size_t j = (s[i] == ' ' && i + 1 < n) ? i + 1 : i;
  const Char first = char_at(s, j);
  if (first.cls != CharClass::Space) return run_end(s, j, first.cls) - i;
  // White space from i (the optional space was followed by more of it).
  size_t end = i, last = i;  // last: where the run's final character starts
  while (end < n) {
    const Char ch = char_at(s, end);
    if (ch.cls != CharClass::Space) break;
    last = end;
    end += ch.len;
  }
  if (end == n || last == i) return end - i;  // `\s+(?!\S)` at the end, or `\s+` of one
  return last - i;                            // `\s+(?!\S)` backs off one character
}

std::vector<std::string_view> gpt2_pieces(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {
    const size_t len = gpt2_piece_length(text, i);
    out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace eng::text
