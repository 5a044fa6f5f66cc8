// UTF-8 and Unicode helpers for the tokenizer: decoding/encoding code points, lossy repair of invalid
// UTF-8 (as Rust's String::from_utf8_lossy), the character classes the Hugging Face tokenizers library
// tests (Rust char::is_whitespace / is_alphanumeric / is_numeric), and GPT-2's byte <-> char table.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace lathe::tokenizer {

// Byte length of the UTF-8 sequence starting with lead byte `b` (1 for a stray continuation byte).
inline int utf8_len(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

inline bool is_utf8_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i past it.
inline char32_t utf8_next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  uint8_t b = p[0];
  if (b < 0x80) {
    i += 1;
    return b;
  }
  if ((b & 0xE0) == 0xC0) {
    i += 2;
    return (char32_t(b & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if ((b & 0xF0) == 0xE0) {
    i += 3;
    return (char32_t(b & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  i += 4;
  return (char32_t(b & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
         (p[3] & 0x3F);
}

// Appends the UTF-8 encoding of code point c.
void utf8_append(std::string& out, char32_t c);

// Number of code points in valid UTF-8 text.
size_t utf8_count(std::string_view s);

// Length of the longest valid UTF-8 prefix of s.
size_t utf8_valid_prefix(std::string_view s);

// s unchanged when it is valid UTF-8; otherwise each maximal invalid subpart replaced by U+FFFD
// (the WHATWG / Rust from_utf8_lossy rule).
std::string utf8_repair(std::string_view s);

// Rust char::is_whitespace (Unicode White_Space).
bool is_whitespace(char32_t c);
// Rust char::is_alphabetic / is_numeric approximated by general category L* / N* (utf8proc).
bool is_alphanumeric(char32_t c);
bool is_numeric(char32_t c);
// Regex \w as the Rust regex crate defines it: alphanumeric, marks, connector punctuation, join controls.
bool is_word_char(char32_t c);

// GPT-2's reversible byte <-> printable char mapping (ByteLevel pre-tokenizer and decoder).
struct ByteLevelTable {
  std::array<char32_t, 256> byte_to_char{};
  std::array<std::string, 256> byte_to_utf8;  // byte_to_char encoded
  // Inverse: code point (< 324) -> byte, or -1.
  std::array<int16_t, 324> char_to_byte{};
  ByteLevelTable();
  static const ByteLevelTable& get();  // immutable after construction
};

}  // namespace lathe::tokenizer
