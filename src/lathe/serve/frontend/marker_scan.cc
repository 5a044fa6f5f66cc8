#include "lathe/serve/frontend/marker_scan.h"

#include <algorithm>
#include <vector>

namespace lathe::serve::detail {

size_t leading_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

size_t trailing_space_start(std::string_view s, size_t end) {
  while (end > 0 && is_space(s[end - 1])) --end;
  return end;
}

size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

size_t incomplete_utf8_suffix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the lead byte; the sequence is incomplete when the
  // lead byte announces more bytes than follow it.
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

MarkerCut cut_before_marker(std::string_view s, std::string_view marker, bool at_end) {
  MarkerCut cut;
  size_t m = s.find(marker);
  if (m != std::string_view::npos) {
    cut.text = trailing_space_start(s, m);
    cut.space = m - cut.text;
    cut.marker = true;
  } else if (at_end) {
    cut.text = s.size();
  } else {
    cut.text = trailing_space_start(s, s.size() - partial_marker_suffix(s, marker));
  }
  return cut;
}

JsonExtent json_extent(std::string_view s) {
  std::vector<char> closers;  // the brackets still open, as the characters that close them
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;  // skip the escaped character (a \uXXXX's hex digits need no care)
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '{': closers.push_back('}'); break;
      case '[': closers.push_back(']'); break;
      case '}':
      case ']':
        if (closers.empty() || closers.back() != c) return {JsonExtent::Status::kMalformed, i};
        closers.pop_back();
        if (closers.empty()) return {JsonExtent::Status::kComplete, i + 1};
        break;
      default: break;
    }
    if (closers.empty()) return {JsonExtent::Status::kMalformed, i};  // s[0] was not a bracket
    if (static_cast<int>(closers.size()) > kMaxArgumentDepth) return {JsonExtent::Status::kMalformed, i};
  }
  return {JsonExtent::Status::kIncomplete, s.size()};
}

}  // namespace lathe::serve::detail
