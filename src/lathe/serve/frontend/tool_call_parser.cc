#include "lathe/serve/frontend/tool_call_parser.h"

#include <random>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/tool_call_scanner.h"

namespace lathe::serve {

namespace detail {

std::string compact_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

std::optional<nlohmann::ordered_json> parse_json(std::string_view text) {
  bool too_deep = false;
  auto depth_check = [&](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
    if (depth > kMaxArgumentDepth) too_deep = true;
    return !too_deep;
  };
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, depth_check, /*allow_exceptions=*/false);
  if (j.is_discarded() || too_deep) return std::nullopt;
  return j;
}

std::optional<ParsedCall> call_from_json(const nlohmann::ordered_json& obj, bool require_arguments) {
  if (!obj.is_object()) return std::nullopt;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  auto args = obj.find("arguments");
  if (args == obj.end()) args = obj.find("parameters");
  ParsedCall call{.name = name->get<std::string>(), .arguments = "{}"};
  if (args == obj.end()) {
    if (require_arguments) return std::nullopt;
    return call;
  }
  if (args->is_string()) {  // some models write the arguments as a JSON string
    std::optional<nlohmann::ordered_json> inner = parse_json(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = compact_json(*inner);
  } else if (args->is_object()) {
    call.arguments = compact_json(*args);
  } else {
    return std::nullopt;
  }
  return call;
}

namespace {

// kNone: everything is content.
class PassThroughScanner final : public ToolCallScanner {
 public:
  ScanStep scan(std::string_view text, bool) override { return ScanStep::content(text.size()); }
};

}  // namespace
}  // namespace detail

ToolCallFormat detect_tool_call_format(std::string_view model_type, std::string_view chat_template) {
  if (!chat_template.empty()) {
    // Gemma 4 first: its end marker <tool_call|> shares a prefix with Hermes' <tool_call>.
    if (chat_template.find("<|tool_call>") != std::string_view::npos) return ToolCallFormat::kGemma4;
    if (chat_template.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
    if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
    if (chat_template.find("<|python_tag|>") != std::string_view::npos) return ToolCallFormat::kLlama3Json;
    return ToolCallFormat::kNone;
  }
  if (model_type.starts_with("qwen2") || model_type.starts_with("qwen3")) return ToolCallFormat::kHermes;
  if (model_type.starts_with("mistral") || model_type.starts_with("ministral")) return ToolCallFormat::kMistral;
  if (model_type.starts_with("gemma4")) return ToolCallFormat::kGemma4;
  return ToolCallFormat::kNone;
}

std::string_view to_string(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kGemma4: return "gemma4";
    case ToolCallFormat::kCount: break;
  }
  return "?";
}

std::optional<ToolCallFormat> tool_call_format_from_string(std::string_view name) {
  for (int i = 0; i < static_cast<int>(ToolCallFormat::kCount); ++i)
    if (to_string(static_cast<ToolCallFormat>(i)) == name) return static_cast<ToolCallFormat>(i);
  if (name == "qwen" || name == "qwen3") return ToolCallFormat::kHermes;
  if (name == "llama3") return ToolCallFormat::kLlama3Json;
  return std::nullopt;
}

std::string random_call_id() {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;  // per call: a few calls per response, no shared generator state
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(gen)];
  return id;
}

namespace {

std::unique_ptr<detail::ToolCallScanner> make_scanner(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return std::make_unique<detail::PassThroughScanner>();
    case ToolCallFormat::kHermes: return detail::make_hermes_scanner();
    case ToolCallFormat::kLlama3Json: return detail::make_llama3_json_scanner();
    case ToolCallFormat::kMistral: return detail::make_mistral_scanner();
    case ToolCallFormat::kGemma4: return detail::make_gemma4_scanner();
    case ToolCallFormat::kCount: break;
  }
  LATHE_CHECK_ARG(false, "[ToolCallParser] unknown tool-call format ", static_cast<int>(format));
  return nullptr;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolCallFormat format, std::function<std::string()> make_call_id)
    : format_(format),
      make_call_id_(make_call_id ? std::move(make_call_id) : std::function<std::string()>(random_call_id)),
      scanner_(make_scanner(format)) {}

ToolCallParser::~ToolCallParser() = default;
ToolCallParser::ToolCallParser(ToolCallParser&&) noexcept = default;
ToolCallParser& ToolCallParser::operator=(ToolCallParser&&) noexcept = default;

ParsedDelta ToolCallParser::feed(std::string_view text) {
  LATHE_CHECK_ARG(!finished_, "[ToolCallParser] feed after finish");
  pending_.append(text);
  return run(false);
}

ParsedDelta ToolCallParser::finish() {
  LATHE_CHECK_ARG(!finished_, "[ToolCallParser] finish called twice");
  finished_ = true;
  return run(true);
}

ParsedDelta ToolCallParser::run(bool at_end) {
  using Kind = detail::ScanStep::Kind;
  ParsedDelta out;
  // Before the end, an incomplete UTF-8 sequence at the tail is not shown to the scanner: markers are
  // ASCII, so this delays no decision, and released content never ends inside a character.
  const size_t limit = at_end ? pending_.size() : pending_.size() - detail::incomplete_utf8_suffix(pending_);
  size_t pos = 0;
  while (pos < limit) {
    detail::ScanStep step = scanner_->scan(std::string_view(pending_).substr(pos, limit - pos), at_end);
    if (step.kind == Kind::kNeedMore) {
      LATHE_ASSERT(!at_end, "a tool-call scanner asked for more text at the end");
      break;
    }
    LATHE_ASSERT(step.n > 0 && step.n <= limit - pos, "scan step of ", step.n, " bytes with ", limit - pos, " left");
    if (step.kind == Kind::kContent) out.content.append(pending_, pos, step.n);
    for (detail::ParsedCall& c : step.calls) {
      std::string id = make_call_id_();
      LATHE_ASSERT(!id.empty(), "make_call_id returned an empty id");
      out.tool_calls.push_back(
          {.index = n_calls_++, .id = std::move(id), .name = std::move(c.name), .arguments = std::move(c.arguments)});
    }
    pos += step.n;
  }
  pending_.erase(0, pos);
  return out;
}

}  // namespace lathe::serve
