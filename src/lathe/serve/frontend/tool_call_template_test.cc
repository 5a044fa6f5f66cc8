// Round trips through chat templates: an assistant message with tool_calls is rendered, its rendered
// part is cut out and parsed back, and the names and arguments (as JSON objects) must match. Qwen3's
// real template (LATHE_TOKENIZERS, default ~/.cache/lathe/tokenizers; skipped when absent) for Hermes;
// the cached llama3 folder is Llama 3.0 and llama2 has no template, so Llama 3.1 JSON, Mistral and
// Gemma 4 go through condensed templates written here after the released ones' tool-call rendering.
// Also: detect_tool_call_format / detect_reasoning_format on the real tokenizer configs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lathe/io/jinja/chat_template.h"
#include "lathe/io/test_paths.h"
#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

using nlohmann::ordered_json;

// tokenizer_config.json without added_tokens_decoder (Gemma 3's 6k entries are slow in ordered_json
// and no template reads them).
std::optional<ordered_json> read_config(const std::string& name) {
  std::ifstream in(std::filesystem::path(lathe::testing::tokenizers_root()) / name / "tokenizer_config.json");
  if (!in) return std::nullopt;
  nlohmann::json config = nlohmann::json::parse(in);
  config.erase("added_tokens_decoder");
  return ordered_json::parse(config.dump());
}

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time now",
   "parameters": {"type": "object", "properties": {}}}}])");

// Arguments with nesting, escaped quotes, braces in strings, non-ASCII text and numbers.
const ordered_json kWeatherArgs = ordered_json::parse(
    "{\"city\": \"Paris\", \"opts\": {\"days\": 2, \"hourly\": false, \"tags\": [\"a\", \"b\"], \"ratio\": 0.5}, "
    "\"note\": \"say \\\"hi\\\" {x} [y] \xE4\xB8\x96\xE7\x95\x8C\"}");

ordered_json assistant_with_calls(std::string content, bool arguments_as_string) {
  ordered_json calls = ordered_json::array();
  int i = 0;
  for (const auto& [name, args] : {std::pair{"get_weather", kWeatherArgs}, std::pair{"get_time", ordered_json::object()}}) {
    ordered_json a = arguments_as_string ? ordered_json(args.dump()) : args;
    calls.push_back({{"id", "c" + std::to_string(i++)}, {"type", "function"},
                     {"function", {{"name", name}, {"arguments", a}}}});
  }
  return {{"role", "assistant"}, {"content", std::move(content)}, {"tool_calls", std::move(calls)}};
}

// The text a template renders for the last (assistant) message: the conversation rendered whole, less
// the rendering of the messages before it with the generation prompt, less the end-of-turn marker.
std::string rendered_reply(const ordered_json& config, const ordered_json& messages, std::string_view end_of_turn) {
  jinja::ChatRequest head{.add_generation_prompt = true, .extra = {{"tools", kTools}}};
  for (size_t i = 0; i + 1 < messages.size(); ++i) head.messages.push_back(messages[i]);
  jinja::ChatRequest whole{.messages = messages, .add_generation_prompt = false, .extra = {{"tools", kTools}}};
  const std::string prompt = jinja::apply_chat_template(config, head);
  std::string full = jinja::apply_chat_template(config, whole);
  EXPECT_EQ(full.rfind(prompt, 0), 0u) << "the prompt is not a prefix of the whole rendering:\n" << prompt << "\n---\n" << full;
  std::string reply = full.substr(std::min(prompt.size(), full.size()));
  size_t eot = reply.rfind(end_of_turn);
  EXPECT_NE(eot, std::string::npos) << reply;
  if (eot != std::string::npos) reply.resize(eot);
  return reply;
}

// The reply, parsed (reasoning first when the format has it), must give back content and both calls.
void expect_calls_round_trip(ToolCallFormat format, ReasoningFormat reasoning, const std::string& reply,
                             const std::string& content) {
  SCOPED_TRACE(reply);
  ReasoningParser thinking(reasoning);
  ReasoningDelta r = thinking.feed(reply);
  ReasoningDelta tail = thinking.finish();
  EXPECT_EQ(r.reasoning + tail.reasoning, "");
  parser_test::ToolParse parsed = parser_test::parse_tools_all_ways(format, r.content + tail.content);
  EXPECT_EQ(parsed.content, content);
  ASSERT_EQ(parsed.calls.size(), 2u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(parsed.calls[0].arguments), nlohmann::json::parse(kWeatherArgs.dump()));
  EXPECT_EQ(parsed.calls[1].name, "get_time");
  EXPECT_EQ(parsed.calls[1].arguments, "{}");
}

const ordered_json kUser = {{"role", "user"}, {"content", "Weather in Paris, and the time?"}};

TEST(ToolCallTemplates, Qwen3RealTemplateRoundTripsHermesCalls) {
  std::optional<ordered_json> config = read_config("qwen3");
  if (!config) GTEST_SKIP() << "no qwen3 tokenizer_config.json under " << lathe::testing::tokenizers_root();
  for (bool as_string : {false, true}) {
    SCOPED_TRACE(as_string ? "arguments as a JSON string" : "arguments as an object");
    for (const std::string content : {"Let me check both.", ""}) {
      ordered_json messages = {kUser, assistant_with_calls(content, as_string)};
      std::string reply = rendered_reply(*config, messages, "<|im_end|>");
      // The last assistant turn gets Qwen3's empty thinking block: the reasoning parser removes it.
      EXPECT_EQ(reply.rfind("<think>\n\n</think>\n\n", 0), 0u) << reply;
      expect_calls_round_trip(ToolCallFormat::kHermes, ReasoningFormat::kQwen3, reply, content);
    }
  }
}

TEST(ToolCallTemplates, DetectOnRealTokenizerConfigs) {
  struct Case {
    const char* dir;
    const char* model_type;  // config.json's, for the family of that tokenizer
    ToolCallFormat tools;
    ReasoningFormat reasoning;
  };
  for (const Case& c : {Case{"qwen3", "qwen3", ToolCallFormat::kHermes, ReasoningFormat::kQwen3},
                        Case{"llama3", "llama", ToolCallFormat::kNone, ReasoningFormat::kNone},  // Llama 3.0: no tools
                        Case{"gemma3", "gemma3_text", ToolCallFormat::kNone, ReasoningFormat::kNone},
                        Case{"llama2", "llama", ToolCallFormat::kNone, ReasoningFormat::kNone}}) {  // no template
    SCOPED_TRACE(c.dir);
    std::optional<ordered_json> config = read_config(c.dir);
    if (!config) GTEST_SKIP() << "no " << c.dir << " tokenizer_config.json under " << lathe::testing::tokenizers_root();
    std::string tmpl = jinja::select_chat_template(*config).value_or("");
    EXPECT_EQ(detect_tool_call_format(c.model_type, tmpl), c.tools);
    EXPECT_EQ(detect_reasoning_format(c.model_type, tmpl), c.reasoning);
  }
}

// Condensed templates: only the assistant turn with tool calls and the generation prompt, rendering the
// calls the way the released templates do.

// Llama 3.1 (the released template takes one call per turn; "; " joins several as the model may).
constexpr const char* kLlama31Template = R"J({%- for message in messages -%}
<|start_header_id|>{{ message['role'] }}<|end_header_id|>

{% if message['tool_calls'] -%}
<|python_tag|>{%- for call in message['tool_calls'] -%}
{%- if not loop.first %}; {% endif -%}
{"name": "{{ call['function']['name'] }}", "parameters": {{ call['function']['arguments'] | tojson }}}
{%- endfor -%}<|eom_id|>
{%- else -%}{{ message['content'] }}<|eot_id|>{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|start_header_id|>assistant<|end_header_id|>

{% endif -%})J";

// Mistral v3 (7B v0.3): the calls as one JSON array after [TOOL_CALLS].
constexpr const char* kMistralV3Template = R"J({{- bos_token -}}
{%- for message in messages -%}
{%- if message['role'] == 'user' -%}[INST] {{ message['content'] }}[/INST]
{%- elif message['tool_calls'] -%}[TOOL_CALLS][
{%- for call in message['tool_calls'] -%}
{"name": "{{ call['function']['name'] }}", "arguments": {{ call['function']['arguments'] | tojson }}, "id": "{{ call['id'] }}"}
{%- if not loop.last %}, {% endif -%}
{%- endfor -%}]</s>
{%- endif -%}
{%- endfor -%})J";

// Mistral v11+: one [TOOL_CALLS]name[ARGS]{...} per call.
constexpr const char* kMistralV11Template = R"J({%- for message in messages -%}
{%- if message['role'] == 'user' -%}[INST]{{ message['content'] }}[/INST]
{%- elif message['tool_calls'] -%}
{%- for call in message['tool_calls'] -%}
[TOOL_CALLS]{{ call['function']['name'] }}[ARGS]{{ call['function']['arguments'] | tojson }}
{%- endfor -%}</s>
{%- endif -%}
{%- endfor -%})J";

// Gemma 4 (specs/gemma4.md §6): arguments in Gemma's notation, keys sorted.
constexpr const char* kGemma4Template = R"J({%- macro format_argument(argument) -%}
{%- if argument is string -%}{{- '<|"|>' + argument + '<|"|>' -}}
{%- elif argument is boolean -%}{{- 'true' if argument else 'false' -}}
{%- elif argument is mapping -%}{{- '{' -}}
{%- for key, value in argument | dictsort -%}{{- key }}:{{ format_argument(value) -}}{%- if not loop.last %},{% endif -%}{%- endfor -%}
{{- '}' -}}
{%- elif argument is sequence -%}{{- '[' -}}
{%- for item in argument -%}{{- format_argument(item) -}}{%- if not loop.last %},{% endif -%}{%- endfor -%}
{{- ']' -}}
{%- else -%}{{- argument -}}{%- endif -%}
{%- endmacro -%}
{{- bos_token -}}
{%- for message in messages -%}
{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
{{- '<|turn>' + role + '\n' -}}
{%- for tool_call in message.get('tool_calls') or [] -%}
{{- '<|tool_call>call:' + tool_call['function']['name'] + '{' -}}
{%- for key, value in tool_call['function']['arguments'] | dictsort -%}
{{- key -}}:{{- format_argument(value) -}}{%- if not loop.last %},{% endif -%}
{%- endfor -%}
{{- '}<tool_call|>' -}}
{%- endfor -%}
{{- message['content'] | trim -}}<turn|>
{% endfor -%}
{%- if add_generation_prompt -%}{{- '<|turn>model\n' -}}{%- endif -%})J";

ordered_json config_with(const char* tmpl) {
  return {{"chat_template", tmpl}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
}

TEST(ToolCallTemplates, CondensedTemplatesRoundTripEveryFormat) {
  struct Case {
    const char* name;
    const char* tmpl;
    const char* end_of_turn;
    ToolCallFormat format;
  };
  for (const Case& c : {Case{"llama3.1", kLlama31Template, "<|eom_id|>", ToolCallFormat::kLlama3Json},
                        Case{"mistral v3", kMistralV3Template, "</s>", ToolCallFormat::kMistral},
                        Case{"mistral v11", kMistralV11Template, "</s>", ToolCallFormat::kMistral},
                        Case{"gemma4", kGemma4Template, "<turn|>", ToolCallFormat::kGemma4}}) {
    SCOPED_TRACE(c.name);
    const ordered_json config = config_with(c.tmpl);
    EXPECT_EQ(detect_tool_call_format("", c.tmpl), c.format);
    ordered_json messages = {kUser, assistant_with_calls("", false)};
    std::string reply = rendered_reply(config, messages, c.end_of_turn);
    expect_calls_round_trip(c.format, ReasoningFormat::kNone, reply, "");
  }
}

}  // namespace
}  // namespace lathe::serve
