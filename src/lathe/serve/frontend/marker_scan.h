// Text helpers shared by the tool-call and reasoning parsers: where ordinary text ends before a marker
// that may still be arriving, whitespace runs, UTF-8 boundaries, and where a JSON value ends.
#pragma once

#include <cstddef>
#include <string_view>

namespace lathe::serve::detail {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the whitespace run at the start of `s`.
size_t leading_space(std::string_view s);
// Start of the whitespace run that ends at `end` (end itself when s[end - 1] is not whitespace).
size_t trailing_space_start(std::string_view s, size_t end);

// Length of the longest proper prefix of `marker` that `s` ends with: the bytes to hold back because the
// marker may be arriving.
size_t partial_marker_suffix(std::string_view s, std::string_view marker);

// Bytes at the end of `s` that begin a UTF-8 sequence without completing it (0 to 3).
size_t incomplete_utf8_suffix(std::string_view s);

// How the front of the undecided text divides before `marker`:
//   text   ordinary text that can be released now,
//   space  whitespace after it to drop because the marker follows it,
//   marker whether the marker starts right after them.
// When the marker is not (yet) there, `text` stops before whatever may still become "whitespace before
// the marker": a trailing whitespace run and a partial marker, unless at_end.
struct MarkerCut {
  size_t text = 0;
  size_t space = 0;
  bool marker = false;
};
MarkerCut cut_before_marker(std::string_view s, std::string_view marker, bool at_end);

// Deepest nesting accepted in call arguments: deeper values are treated as malformed, which keeps the
// recursive serialisation (and Gemma 4's recursive-descent reader) off the end of the stack.
inline constexpr int kMaxArgumentDepth = 128;

// Where the JSON object or array that starts at s[0] ('{' or '[') ends, by bracket matching outside
// strings (escapes respected). Not a validator: the text is parsed afterwards.
struct JsonExtent {
  enum class Status : unsigned char { kComplete, kIncomplete, kMalformed };
  Status status = Status::kIncomplete;
  size_t end = 0;  // kComplete: one past the closing bracket
};
JsonExtent json_extent(std::string_view s);

}  // namespace lathe::serve::detail
