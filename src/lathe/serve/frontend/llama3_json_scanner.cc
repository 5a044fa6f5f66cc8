// Llama 3.1+ JSON tool calls: a message that calls tools is nothing but the calls,
// [<|python_tag|>]{"name": "f", "parameters": {...}} with further calls after "; ". Only a message that
// starts (whitespace aside) with <|python_tag|> or '{' can be calls; once it is content, it stays content.
#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/tool_call_scanner.h"

namespace lathe::serve::detail {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

// The first keys a call object may start with. A JSON object that starts with any other key is a JSON
// answer, released as content without waiting for its end.
bool is_call_key(std::string_view key) {
  return key == "name" || key == "parameters" || key == "arguments" || key == "type" || key == "id";
}

// For an object `s` that starts with '{' but is incomplete: true when its first key already shows it
// is not a call.
bool first_key_rules_out_call(std::string_view s) {
  size_t i = 1 + leading_space(s.substr(1));
  if (i == s.size()) return false;
  if (s[i] != '"') return s[i] != '}';
  std::string key;
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') return true;  // call keys have no escapes
    if (s[i] == '"') return !is_call_key(key);
    key += s[i];
    if (key.size() > 10) return true;
  }
  return false;  // the key is still arriving
}

class Llama3JsonScanner final : public ToolCallScanner {
 public:
  ScanStep scan(std::string_view text, bool at_end) override {
    switch (state_) {
      case State::kText: return ScanStep::content(text.size());
      case State::kAfterCall: return after_call(text, at_end);
      case State::kStart:
      case State::kAfterSeparator: return scan_call(text, at_end);
    }
    return ScanStep::content(text.size());
  }

 private:
  enum class State : uint8_t {
    kStart,           // nothing decided yet
    kAfterCall,       // after a call: "; " and the next call, or the end
    kAfterSeparator,  // after ';': the next call
    kText,            // content to the end
  };

  // Whatever follows is not a call: content to the end. After a separator the whitespace is dropped.
  ScanStep to_text(std::string_view text) {
    const bool separator = state_ == State::kAfterSeparator;
    state_ = State::kText;
    size_t space = separator ? leading_space(text) : 0;
    return space > 0 ? ScanStep::drop(space) : ScanStep::content(text.size());
  }

  ScanStep scan_call(std::string_view text, bool at_end) {
    size_t i = leading_space(text);
    if (i == text.size()) {
      if (!at_end) return ScanStep::need_more();
      return state_ == State::kStart ? to_text(text) : ScanStep::drop(text.size());
    }
    std::string_view rest = text.substr(i);
    if (rest.substr(0, kPythonTag.size()) == kPythonTag) {
      i += kPythonTag.size();
      i += leading_space(text.substr(i));
      if (i == text.size()) return at_end ? to_text(text) : ScanStep::need_more();
    } else if (rest.size() < kPythonTag.size() && kPythonTag.substr(0, rest.size()) == rest) {
      return at_end ? to_text(text) : ScanStep::need_more();
    }
    if (text[i] != '{') return to_text(text);
    std::string_view object = text.substr(i);
    JsonExtent extent = json_extent(object);
    if (extent.status == JsonExtent::Status::kMalformed) return to_text(text);
    if (extent.status == JsonExtent::Status::kIncomplete) {
      if (at_end || first_key_rules_out_call(object)) return to_text(text);
      return ScanStep::need_more();
    }
    std::optional<nlohmann::ordered_json> j = parse_json(object.substr(0, extent.end));
    std::optional<ParsedCall> call = j ? call_from_json(*j, /*require_arguments=*/true) : std::nullopt;
    if (!call) return to_text(text);
    state_ = State::kAfterCall;
    return ScanStep::call(i + extent.end, std::move(*call));
  }

  ScanStep after_call(std::string_view text, bool at_end) {
    size_t i = leading_space(text);
    if (i == text.size()) return at_end ? ScanStep::drop(text.size()) : ScanStep::need_more();
    if (text[i] == ';') {
      state_ = State::kAfterSeparator;
      return ScanStep::drop(i + 1);
    }
    state_ = State::kText;  // text after the calls: content, the whitespace before it dropped
    return i > 0 ? ScanStep::drop(i) : ScanStep::content(text.size());
  }

  State state_ = State::kStart;
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_llama3_json_scanner() { return std::make_unique<Llama3JsonScanner>(); }

}  // namespace lathe::serve::detail
