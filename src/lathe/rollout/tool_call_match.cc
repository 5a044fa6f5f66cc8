#include "lathe/rollout/tool_call_match.h"

#include <algorithm>
#include <optional>

#include "lathe/base/error.h"

namespace lathe::rollout {

namespace {

using Json = nlohmann::ordered_json;

// One expected call from its object form.
ToolCall expected_call(const Json& c, const std::string& where) {
  const Json& f = c.is_object() && c.contains("function") && c["function"].is_object() ? c["function"] : c;
  LATHE_CHECK_ARG(f.is_object() && f.contains("name") && f["name"].is_string() && !f["name"].get<std::string>().empty(),
                  where, " = ", c.dump(), ": expected a tool call {\"name\": ..., \"arguments\": {...}}");
  ToolCall out{.name = f["name"].get<std::string>()};
  const char* key = f.contains("arguments") ? "arguments" : f.contains("parameters") ? "parameters" : nullptr;
  if (key == nullptr) return out;
  Json args = f[key];
  if (args.is_string()) {  // OpenAI's messages carry the arguments as a JSON string
    args = Json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  }
  LATHE_CHECK_ARG(args.is_object(), where, ".", key, " = ", f[key].dump(), ": expected an object of arguments");
  out.arguments = std::move(args);
  return out;
}

}  // namespace

serve::ToolCallFormat tool_call_format_to_match(std::string_view name, std::string_view where) {
  const std::optional<serve::ToolCallFormat> f = serve::tool_call_format_from_string(name);
  LATHE_CHECK_ARG(f && *f != serve::ToolCallFormat::kNone, where, " = ", name,
                  ": the model's call syntax, one of hermes, llama3_json, mistral, gemma4 (as --tool-call-parser)");
  return *f;
}

std::vector<ToolCall> parse_tool_calls(std::string_view completion, serve::ToolCallFormat format) {
  int next_id = 0;
  serve::ToolCallParser parser(format, [&next_id] { return "call_" + std::to_string(next_id++); });
  std::vector<serve::ToolCallDelta> deltas = parser.feed(completion).tool_calls;
  for (serve::ToolCallDelta& d : parser.finish().tool_calls) deltas.push_back(std::move(d));
  std::vector<ToolCall> calls;
  for (const serve::ToolCallDelta& d : deltas) {  // each call arrives whole, in one delta
    Json args = Json::parse(d.arguments, nullptr, /*allow_exceptions=*/false);
    calls.push_back({.name = d.name, .arguments = args.is_object() ? std::move(args) : Json::object()});
  }
  return calls;
}

std::vector<ToolCall> expected_tool_calls(const Json& cell, const std::string& where) {
  if (cell.is_string()) {
    const Json parsed = Json::parse(cell.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    LATHE_CHECK_ARG(!parsed.is_discarded(), where, " = ", cell.dump(), ": not JSON");
    return expected_tool_calls(parsed, where);
  }
  std::vector<ToolCall> out;
  if (!cell.is_array()) {
    out.push_back(expected_call(cell, where));
    return out;
  }
  for (size_t i = 0; i < cell.size(); ++i) out.push_back(expected_call(cell[i], str_cat(where, "[", i, "]")));
  return out;
}

ToolCallMatch match_tool_calls(const std::vector<ToolCall>& got, const std::vector<ToolCall>& want) {
  ToolCallMatch m;
  for (size_t i = 0; i < want.size(); ++i) {
    const ToolCall* g = i < got.size() ? &got[i] : nullptr;
    m.checks += 1 + static_cast<int>(want[i].arguments.size());
    if (g == nullptr) continue;
    m.passed += g->name == want[i].name ? 1 : 0;
    for (auto it = want[i].arguments.begin(); it != want[i].arguments.end(); ++it)
      m.passed += g->arguments.contains(it.key()) && g->arguments[it.key()] == it.value() ? 1 : 0;
  }
  if (got.size() > want.size()) m.checks += static_cast<int>(got.size() - want.size());
  return m;
}

}  // namespace lathe::rollout
