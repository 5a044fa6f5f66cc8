// The per-format half of ToolCallParser (internal): a scanner looks at the front of the undecided text
// and either decides about a prefix of it (content, dropped separator, calls) or asks for more text.
// The parser applies its decisions, so a scanner's answers depend only on the text it was shown: that
// is what makes every split of the output give the same result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::serve::detail {

struct ParsedCall {
  std::string name;
  std::string arguments;  // compact JSON object (compact_json)
};

struct ScanStep {
  enum class Kind : uint8_t { kNeedMore, kContent, kDrop, kCalls };
  Kind kind = Kind::kNeedMore;
  size_t n = 0;                  // bytes consumed from the front (> 0 unless kNeedMore)
  std::vector<ParsedCall> calls; // kCalls: one or more, in order

  static ScanStep need_more() { return {}; }
  static ScanStep content(size_t n) { return {Kind::kContent, n, {}}; }
  static ScanStep drop(size_t n) { return {Kind::kDrop, n, {}}; }
  static ScanStep call(size_t n, ParsedCall c) {
    ScanStep s{Kind::kCalls, n, {}};
    s.calls.push_back(std::move(c));
    return s;
  }
};

class ToolCallScanner {
 public:
  virtual ~ToolCallScanner() = default;
  // `text` is non-empty. With at_end (no more text will come) the answer is never kNeedMore. A scanner
  // may change its state when it answers anything but kNeedMore: the parser always applies the step.
  virtual ScanStep scan(std::string_view text, bool at_end) = 0;
};

std::unique_ptr<ToolCallScanner> make_hermes_scanner();
std::unique_ptr<ToolCallScanner> make_llama3_json_scanner();
std::unique_ptr<ToolCallScanner> make_mistral_scanner();
std::unique_ptr<ToolCallScanner> make_gemma4_scanner();

// The serialisation of arguments: nlohmann's dump() without indentation, non-ASCII kept as UTF-8
// (invalid UTF-8 replaced by U+FFFD rather than thrown).
std::string compact_json(const nlohmann::ordered_json& j);

// Parses JSON text, nullopt on a syntax error or a nesting deeper than kMaxArgumentDepth.
std::optional<nlohmann::ordered_json> parse_json(std::string_view text);

// A call from a JSON object {"name": "...", "arguments": {...}} ("parameters" is taken for
// "arguments"; arguments given as a string holding a JSON object are accepted). Without arguments the
// call has "{}" unless require_arguments. nullopt if the object is not such a call.
std::optional<ParsedCall> call_from_json(const nlohmann::ordered_json& obj, bool require_arguments);

// Gemma 4's value notation (strings quoted with <|"|>, bare keys, numbers and booleans, nested {} and
// []) to JSON: `text` must be exactly one object `{...}`, whitespace around it aside. nullopt when it
// is not.
std::optional<nlohmann::ordered_json> parse_gemma4_object(std::string_view text);

}  // namespace lathe::serve::detail
