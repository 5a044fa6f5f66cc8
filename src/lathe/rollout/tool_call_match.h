// The `tool_call` reward of `lathe grpo` (rewards.h): does a completion make the tool calls a dataset row
// expects? The completion's calls are read by the OpenAI server's own parser for the model's call syntax
// (serve/frontend/tool_call_parser.h: Hermes <tool_call>{json}</tool_call>, Llama 3 JSON, Mistral,
// Gemma 4), so training rewards exactly what `lathe serve` will return as `tool_calls`.
//
// Checks, per expected call in order: its name, then each of its arguments (the value, compared as JSON:
// 2 == 2.0, "2" != 2, strings exactly). Arguments the model adds beyond the expected ones are not checked
// (the "required arguments" of a function schema). Every call the completion makes beyond the expected ones
// is one failed check, so an exact match means the same calls and no others. A malformed call (not JSON, no
// name) is content to the parser: no call at all.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lathe/serve/frontend/tool_call_parser.h"

namespace lathe::rollout {

struct ToolCall {
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

// The call syntax a reward or `lathe eval` reads calls in, by its --tool-call-parser name (hermes,
// llama3_json, mistral, gemma4, and their aliases); InvalidArgument naming `where` for anything else,
// "none" included (matching calls needs a syntax to read them in).
serve::ToolCallFormat tool_call_format_to_match(std::string_view name, std::string_view where);

// The calls in a whole completion, in order (the serving parser, fed the text in one piece).
std::vector<ToolCall> parse_tool_calls(std::string_view completion, serve::ToolCallFormat format);

// The calls a dataset cell expects: one {"name": ..., "arguments": {...}} object (OpenAI's {"function":
// {...}} wrapping and "parameters" for "arguments" accepted, as are arguments given as a JSON string), a
// list of them ([] = no call expected), or a JSON string holding either. InvalidArgument naming `where`
// for anything else.
std::vector<ToolCall> expected_tool_calls(const nlohmann::ordered_json& cell, const std::string& where);

struct ToolCallMatch {
  int checks = 0;  // names + expected arguments + unexpected extra calls
  int passed = 0;
  bool exact() const { return passed == checks; }
  double fraction() const { return checks == 0 ? 1.0 : static_cast<double>(passed) / checks; }
};

ToolCallMatch match_tool_calls(const std::vector<ToolCall>& got, const std::vector<ToolCall>& want);

}  // namespace lathe::rollout
