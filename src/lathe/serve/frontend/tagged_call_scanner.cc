// The formats whose calls sit between a start and an end marker: Hermes / Qwen
// (<tool_call>{json}</tool_call>) and Gemma 4 (<|tool_call>call:NAME{...}<tool_call|>).
#include <algorithm>

#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/tool_call_scanner.h"

namespace lathe::serve::detail {
namespace {

using BodyParser = std::optional<ParsedCall> (*)(std::string_view body);

class TaggedCallScanner final : public ToolCallScanner {
 public:
  TaggedCallScanner(std::string_view start, std::string_view end, BodyParser parse)
      : start_(start), end_(end), parse_(parse) {}

  ScanStep scan(std::string_view text, bool at_end) override {
    if (after_call_) {  // the whitespace after a call is the template's separator
      size_t space = leading_space(text);
      if (space == text.size() && !at_end) return ScanStep::need_more();
      after_call_ = false;
      if (space > 0) return ScanStep::drop(space);
    }
    MarkerCut cut = cut_before_marker(text, start_, at_end);
    if (cut.text > 0) return ScanStep::content(cut.text);
    if (!cut.marker) return ScanStep::need_more();
    return scan_call(text, cut.space, at_end);
  }

 private:
  // `text` is `space` bytes of whitespace, then the start marker. The whitespace goes with the call
  // (dropped) or, when the call is malformed, with the marker (content as written).
  ScanStep scan_call(std::string_view text, size_t space, bool at_end) {
    const size_t body_begin = space + start_.size();
    const size_t close = text.find(end_, std::max(body_begin, search_from_));
    if (close == std::string_view::npos && !at_end) {
      // Resume the search where an end marker could still begin.
      search_from_ = std::max(body_begin, text.size() - std::min(text.size(), end_.size() - 1));
      return ScanStep::need_more();
    }
    search_from_ = 0;
    // The output may end inside a call whose body is complete (the end marker cut as a stop string, or
    // never written): that is still the call. A body holding a second start marker abandons the first.
    std::string_view body =
        close == std::string_view::npos ? text.substr(body_begin) : text.substr(body_begin, close - body_begin);
    if (body.find(start_) == std::string_view::npos) {
      if (std::optional<ParsedCall> call = parse_(body)) {
        after_call_ = true;
        return ScanStep::call(close == std::string_view::npos ? text.size() : close + end_.size(), std::move(*call));
      }
    }
    // Malformed: the marker is content as written, and what follows it is scanned again as content.
    return ScanStep::content(body_begin);
  }

  std::string_view start_, end_;
  BodyParser parse_;
  bool after_call_ = false;
  size_t search_from_ = 0;  // where the end-marker search resumes while a call is incomplete
};

std::string_view trim(std::string_view s) {
  size_t b = leading_space(s);
  return s.substr(b, trailing_space_start(s, s.size()) - b);
}

// <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
std::optional<ParsedCall> parse_hermes_body(std::string_view body) {
  std::optional<nlohmann::ordered_json> j = parse_json(body);  // surrounding whitespace allowed
  if (!j) return std::nullopt;
  return call_from_json(*j, /*require_arguments=*/false);
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || static_cast<unsigned char>(c) >= 0x80;
}

// <|tool_call>call:NAME{key:value,...}<tool_call|>
std::optional<ParsedCall> parse_gemma4_body(std::string_view body) {
  body = trim(body);
  constexpr std::string_view kCall = "call:";
  if (body.substr(0, kCall.size()) != kCall) return std::nullopt;
  body.remove_prefix(kCall.size());
  size_t brace = body.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  std::string_view name = trim(body.substr(0, brace));
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) return std::nullopt;
  std::optional<nlohmann::ordered_json> args = parse_gemma4_object(body.substr(brace));
  if (!args) return std::nullopt;
  return ParsedCall{.name = std::string(name), .arguments = compact_json(*args)};
}

}  // namespace

std::unique_ptr<ToolCallScanner> make_hermes_scanner() {
  return std::make_unique<TaggedCallScanner>("<tool_call>", "</tool_call>", &parse_hermes_body);
}

std::unique_ptr<ToolCallScanner> make_gemma4_scanner() {
  return std::make_unique<TaggedCallScanner>("<|tool_call>", "<tool_call|>", &parse_gemma4_body);
}

}  // namespace lathe::serve::detail
