// Mistral tool calls after the [TOOL_CALLS] control token, in both generations of the syntax:
//   tokenizer v3..v7 (Mistral 7B v0.3, Nemo, Small 3.0): [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
//   tokenizer v11+ (Small 3.2, Magistral, Devstral):     [TOOL_CALLS]f[ARGS]{...}, one [TOOL_CALLS] per call,
//     optionally [TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{...}; detokenised without special tokens the
//     [ARGS] vanishes, so [TOOL_CALLS]f{...} is read too.
#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/tool_call_scanner.h"

namespace lathe::serve::detail {
namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// The result of reading one piece of a call: done (at `end`), need more text, or not a call.
struct Piece {
  enum class Status : uint8_t { kDone, kNeedMore, kBad };
  Status status = Status::kBad;
  size_t end = 0;
};
constexpr Piece kNeedMore{Piece::Status::kNeedMore, 0};
constexpr Piece kBad{Piece::Status::kBad, 0};

// `lit` at text[i]: kDone past it, kNeedMore when the text ends inside it, kBad otherwise.
Piece literal(std::string_view text, size_t i, std::string_view lit) {
  std::string_view rest = text.substr(i);
  if (rest.substr(0, lit.size()) == lit) return {Piece::Status::kDone, i + lit.size()};
  if (rest.size() < lit.size() && lit.substr(0, rest.size()) == rest) return kNeedMore;
  return kBad;
}

class MistralScanner final : public ToolCallScanner {
 public:
  ScanStep scan(std::string_view text, bool at_end) override {
    if (after_call_) {
      size_t space = leading_space(text);
      if (space == text.size() && !at_end) return ScanStep::need_more();
      after_call_ = false;
      if (space > 0) return ScanStep::drop(space);
    }
    MarkerCut cut = cut_before_marker(text, kToolCalls, at_end);
    if (cut.text > 0) return ScanStep::content(cut.text);
    if (!cut.marker) return ScanStep::need_more();

    // The whitespace before the marker goes with the calls (dropped) or, when they are malformed, with
    // the marker (content as written, and what follows is scanned again as content).
    const size_t marker_end = cut.space + kToolCalls.size();
    size_t i = marker_end + leading_space(text.substr(marker_end));
    ScanStep step = i == text.size() ? ScanStep::need_more()
                    : text[i] == '['  ? scan_array(text, i)
                                      : scan_named(text, i);
    if (step.kind == ScanStep::Kind::kContent || (step.kind == ScanStep::Kind::kNeedMore && at_end))
      return ScanStep::content(marker_end);
    if (step.kind == ScanStep::Kind::kCalls) after_call_ = true;
    return step;
  }

 private:
  // The scan_* functions answer kContent (with no length) for "not calls".
  static ScanStep malformed() { return ScanStep::content(0); }

  // [{"name": ..., "arguments": ...}, ...] at text[i].
  static ScanStep scan_array(std::string_view text, size_t i) {
    JsonExtent extent = json_extent(text.substr(i));
    if (extent.status == JsonExtent::Status::kIncomplete) return ScanStep::need_more();
    if (extent.status == JsonExtent::Status::kComplete) {
      std::optional<nlohmann::ordered_json> j = parse_json(text.substr(i, extent.end));
      if (j && j->is_array() && !j->empty()) {
        ScanStep step{ScanStep::Kind::kCalls, i + extent.end, {}};
        for (const nlohmann::ordered_json& item : *j) {
          std::optional<ParsedCall> call = call_from_json(item, /*require_arguments=*/false);
          if (!call) return malformed();
          step.calls.push_back(std::move(*call));
        }
        return step;
      }
    }
    return malformed();
  }

  // name[CALL_ID]id[ARGS]{...}, the [CALL_ID] part optional, [ARGS] optional, at text[i].
  static ScanStep scan_named(std::string_view text, size_t i) {
    const size_t name_begin = i;
    while (i < text.size() && is_name_char(text[i])) ++i;
    if (i == text.size()) return ScanStep::need_more();
    std::string_view name = text.substr(name_begin, i - name_begin);
    if (name.empty()) return malformed();
    if (text[i] == '[') {
      Piece p = literal(text, i, kCallId);
      if (p.status == Piece::Status::kDone) {  // the id: letters and digits up to the next marker
        i = p.end;
        while (i < text.size() && is_name_char(text[i])) ++i;
        if (i == text.size()) return ScanStep::need_more();
      } else if (p.status == Piece::Status::kNeedMore) {
        return ScanStep::need_more();
      }
      p = literal(text, i, kArgs);
      if (p.status == Piece::Status::kNeedMore) return ScanStep::need_more();
      if (p.status == Piece::Status::kBad) return malformed();
      i = p.end;
    }
    i += leading_space(text.substr(i));
    if (i == text.size()) return ScanStep::need_more();
    if (text[i] != '{') return malformed();
    JsonExtent extent = json_extent(text.substr(i));
    if (extent.status == JsonExtent::Status::kIncomplete) return ScanStep::need_more();
    if (extent.status == JsonExtent::Status::kMalformed) return malformed();
    std::optional<nlohmann::ordered_json> args = parse_json(text.substr(i, extent.end));
    if (!args || !args->is_object()) return malformed();
    return ScanStep::call(i + extent.end, ParsedCall{.name = std::string(name), .arguments = compact_json(*args)});
  }

  bool after_call_ = false;
};

}  // namespace

std::unique_ptr<ToolCallScanner> make_mistral_scanner() { return std::make_unique<MistralScanner>(); }

}  // namespace lathe::serve::detail
