// Character classes by table lookup: ASCII from a 128-entry table, the rest
// by binary search over the generated ranges (648 letter, 134 number).
#include "io/unicode_class.h"

#include <array>

namespace eng::text {
namespace {

#include "io/unicode_tables.inc"

template <size_t N>
bool in_ranges(const uint32_t (&r)[N][2], uint32_t cp) {
  size_t lo = 0, hi = N;  // first range whose last code point >= cp
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (r[mid][1] < cp)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < N && r[lo][0] <= cp;
}

// Unicode's White_Space property (PropList.txt; unchanged since Unicode 6.3).
bool white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

CharClass slow_class(uint32_t cp) {
  if (cp == kInvalidCodePoint) return CharClass::Other;
  if (white_space(cp)) return CharClass::Space;
  if (in_ranges(kLetterRanges, cp)) return CharClass::Letter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::Number;
  return CharClass::Other;
}

const std::array<CharClass, 128> kAscii = [] {
  std::array<CharClass, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) t[c] = slow_class(c);
  return t;
}();

}  // namespace

CharClass char_class(uint32_t cp) { return cp < 128 ? kAscii[cp] : slow_class(cp); }

}  // namespace eng::text
