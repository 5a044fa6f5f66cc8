// Python `str` semantics on UTF-8 strings, as Jinja templates see them through Python: lengths and
// indices count code points, strip()/split() use Unicode whitespace, splitlines() knows all of
// Python's line breaks. Case mapping covers ASCII, Latin-1, Greek and Cyrillic (documented gap).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::jinja {

// Decodes the code point starting at s[i] and advances i; invalid bytes decode as U+FFFD (one byte).
char32_t utf8_decode(std::string_view s, size_t& i);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);
// One string per code point (Python iterates a str by characters).
std::vector<std::string> utf8_chars(std::string_view s);

bool py_isspace(char32_t c);  // str.isspace(): Unicode White_Space plus U+001C..U+001F

// str.strip(chars) / lstrip / rstrip; chars = nullopt strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; sep = nullopt splits on runs of whitespace.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 replaces all. An empty `from` inserts between characters.
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);  // first character upper, the rest lower
std::string py_title(std::string_view s);       // upper after any non-letter, lower elsewhere
bool py_isalpha(char32_t c);
bool py_isalnum(char32_t c);

}  // namespace lathe::jinja
