// UTF-8 helpers and Unicode character classes (utf8proc for the general categories).
#include "lathe/io/tokenizer/unicode.h"

#include <utf8proc.h>

namespace lathe::tokenizer {

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(char(c));
  } else if (c < 0x800) {
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(char(0xE0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

size_t utf8_count(std::string_view s) {
  size_t n = 0;
  for (char ch : s) n += !is_utf8_continuation(uint8_t(ch));
  return n;
}

namespace {

// Length of the valid sequence at s[i], or 0 with `bad` = length of the maximal invalid subpart.
size_t valid_seq_len(std::string_view s, size_t i, size_t& bad) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = s.size();
  uint8_t b = p[i];
  bad = 1;
  if (b < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (excludes overlongs and surrogates)
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= n) return 0;
    uint8_t c = p[i + k];
    bool ok = k == 1 ? (c >= lo && c <= hi) : is_utf8_continuation(c);
    if (!ok) return 0;
    bad = k + 1;
  }
  return len;
}

}  // namespace

size_t utf8_valid_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (uint8_t(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad;
    size_t len = valid_seq_len(s, i, bad);
    if (len == 0) return i;
    i += len;
  }
  return i;
}

std::string utf8_repair(std::string_view s) {
  size_t i = utf8_valid_prefix(s);
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  while (i < s.size()) {
    size_t bad;
    size_t len = valid_seq_len(s, i, bad);
    if (len) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      // `bad` counts the lead byte plus the continuation bytes that were still plausible.
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

namespace {
inline utf8proc_propval_t category(char32_t c) { return utf8proc_category(utf8proc_int32_t(c)); }
}  // namespace

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  auto k = category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || k == UTF8PROC_CATEGORY_ND ||
         k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return c == '_' || is_alphanumeric(c);
  auto k = category(c);
  return is_alphanumeric(c) || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC ||
         k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

ByteLevelTable::ByteLevelTable() {
  // Printable bytes map to themselves; the others to 256, 257, ... in byte order (GPT-2's bytes_to_unicode).
  char_to_byte.fill(-1);
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char32_t c = printable ? char32_t(b) : next++;
    byte_to_char[b] = c;
    utf8_append(byte_to_utf8[b], c);
    char_to_byte[c] = int16_t(b);
  }
}

const ByteLevelTable& ByteLevelTable::get() {
  static const ByteLevelTable table;  // immutable once built (thread-safe static init)
  return table;
}

}  // namespace lathe::tokenizer
