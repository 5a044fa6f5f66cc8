// Gemma 4 chat template constructs (specs/gemma4.md section 6): a condensed template written in the
// style of the released one (recursive format_argument macro with keyword defaults, dictsort,
// namespaces, reverse range scans, dict.get, `is sequence and is not string`, thinking stripped
// from earlier model turns, the <|tool>/<|tool_call>/<|tool_response> syntax). Expected outputs
// come from Python Jinja2 configured as transformers configures it.
#include <gtest/gtest.h>

#include "lathe/io/jinja/chat_template.h"

namespace lathe::jinja {
namespace {

constexpr const char* kGemma4StyleTemplate = R"J({%- macro format_argument(argument, escape_keys=True) -%}
    {%- if argument is string -%}
        {{- '<|"|>' + argument + '<|"|>' -}}
    {%- elif argument is boolean -%}
        {{- 'true' if argument else 'false' -}}
    {%- elif argument is mapping -%}
        {{- '{' -}}
        {%- set ns = namespace(found_first=false) -%}
        {%- for key, value in argument | dictsort -%}
            {%- if ns.found_first %},{% endif -%}
            {%- set ns.found_first = true -%}
            {{- ('<|"|>' + key + '<|"|>') if escape_keys else key -}}
            :{{- format_argument(value, escape_keys=escape_keys) -}}
        {%- endfor -%}
        {{- '}' -}}
    {%- elif argument is sequence -%}
        {{- '[' -}}
        {%- for item in argument -%}
            {{- format_argument(item, escape_keys=escape_keys) -}}
            {%- if not loop.last %},{% endif -%}
        {%- endfor -%}
        {{- ']' -}}
    {%- else -%}
        {{- argument -}}
    {%- endif -%}
{%- endmacro -%}
{%- macro format_parameters(properties, required) -%}
    {%- for key, value in properties | dictsort -%}
        {{ key }}:{description:<|"|>{{ value['description'] | default('') }}<|"|>
        {%- if value['type'] | upper == 'STRING' and value['enum'] -%}
            ,enum:{{ format_argument(value['enum']) }}
        {%- endif -%}
        ,type:<|"|>{{ value['type'] | upper }}<|"|>}
        {%- if not loop.last %},{% endif -%}
    {%- endfor -%}
{%- endmacro -%}
{%- macro format_function_declaration(tool) -%}
    declaration:{{- tool['function']['name'] -}}{description:<|"|>{{- tool['function']['description'] -}}<|"|>
    {%- set params = tool['function']['parameters'] -%}
    {%- if params -%}
        ,parameters:{properties:{ {{- format_parameters(params['properties'], params['required']) -}} }
        {%- if params['required'] -%}
            ,required:[{%- for item in params['required'] -%}<|"|>{{- item -}}<|"|>{{- ',' if not loop.last -}}{%- endfor -%}]
        {%- endif -%}
        ,type:<|"|>{{- params['type'] | upper -}}<|"|>}
    {%- endif -%}
    {%- if 'response' in tool['function'] -%},response:{}{%- endif -%}
    }
{%- endmacro -%}
{%- macro strip_thinking(text) -%}
    {%- set ns = namespace(result='') -%}
    {%- for part in text.split('<channel|>') -%}
        {%- if '<|channel>' in part -%}
            {%- set ns.result = ns.result + part.split('<|channel>')[0] -%}
        {%- else -%}
            {%- set ns.result = ns.result + part -%}
        {%- endif -%}
    {%- endfor -%}
    {{- ns.result | trim -}}
{%- endmacro -%}
{%- set ns = namespace(prev_message_type=None) -%}
{%- set loop_messages = messages -%}
{{- bos_token -}}
{%- if (enable_thinking is defined and enable_thinking) or tools or messages[0]['role'] in ['system', 'developer'] -%}
    {{- '<|turn>system\n' -}}
    {%- if enable_thinking is defined and enable_thinking -%}
        {{- '<|think|>\n' -}}
    {%- endif -%}
    {%- if messages[0]['role'] in ['system', 'developer'] -%}
        {{- messages[0]['content'] | trim -}}
        {%- set loop_messages = messages[1:] -%}
    {%- endif -%}
    {%- for tool in tools | default([]) %}
        {{- '<|tool>' -}}
        {{- format_function_declaration(tool) | trim -}}
        {{- '<tool|>' -}}
    {%- endfor %}
    {{- '<turn|>\n' -}}
{%- endif %}
{%- set ns_turn = namespace(last_user_idx=-1) -%}
{%- for i in range(loop_messages | length) -%}
    {%- if loop_messages[i]['role'] == 'user' -%}
        {%- set ns_turn.last_user_idx = i -%}
    {%- endif -%}
{%- endfor -%}
{%- for message in loop_messages -%}
    {%- if message['role'] != 'tool' -%}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}
    {%- set prev_nt = namespace(role=None, found=false) -%}
    {%- if loop.index0 > 0 -%}
        {%- for j in range(loop.index0 - 1, -1, -1) -%}
            {%- if not prev_nt.found and loop_messages[j]['role'] != 'tool' -%}
                {%- set prev_nt.role = loop_messages[j]['role'] -%}
                {%- set prev_nt.found = true -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if not (role == 'model' and prev_nt.role == 'assistant') -%}
        {{- '<|turn>' + role + '\n' }}
    {%- endif -%}
    {%- set thinking_text = message.get('reasoning') or message.get('reasoning_content') -%}
    {%- if thinking_text and loop.index0 > ns_turn.last_user_idx and message.get('tool_calls') -%}
        {{- '<|channel>thought\n' + thinking_text + '\n<channel|>' -}}
    {%- endif -%}
    {%- set ns.prev_message_type = None -%}
    {%- for tool_call in message.get('tool_calls') or [] -%}
        {%- set function = tool_call['function'] -%}
        {{- '<|tool_call>call:' + function['name'] + '{' -}}
        {%- for key, value in function['arguments'] | dictsort -%}
            {{- key -}}:{{- format_argument(value, escape_keys=False) -}}{%- if not loop.last %},{% endif -%}
        {%- endfor -%}
        {{- '}<tool_call|>' -}}
        {%- set ns.prev_message_type = 'tool_call' -%}
    {%- endfor -%}
    {%- for k in range(loop.index0 + 1, loop_messages | length) if message.get('tool_calls') -%}
        {%- if loop_messages[k]['role'] == 'tool' -%}
            {%- set follow = loop_messages[k] -%}
            {{- '<|tool_response>response:' + follow.get('name', 'unknown') + '{value:' + format_argument(follow['content'], escape_keys=False) + '}<tool_response|>' -}}
            {%- set ns.prev_message_type = 'tool_response' -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if message['content'] is string -%}
        {{- strip_thinking(message['content']) if role == 'model' else message['content'] | trim -}}
    {%- elif message['content'] is sequence -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'text' -%}
                {{- item['text'] | trim -}}
            {%- elif item['type'] == 'image' -%}
                {{- '<|image|>' -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if not (ns.prev_message_type == 'tool_response' and not message.get('content')) -%}
        {{- '<turn|>\n' -}}
    {%- endif -%}
    {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt and ns.prev_message_type != 'tool_response' -%}
    {{- '<|turn>model\n' -}}
{%- endif -%}
)J";

struct Conversation {
  const char* name;
  const char* context;
  const char* expected;
};

const Conversation kConversations[] = {
    {"system_thinking_tools", R"J({"messages": [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "reasoning_content": "need tool", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"unit": "C", "city": "Paris", "days": 2, "hourly": false, "extra": {"b": [1, "x"]}}}}]}, {"role": "tool", "name": "get_weather", "tool_call_id": "c1", "content": "18C sunny"}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {"type": "object", "properties": {"unit": {"type": "string", "description": "Unit", "enum": ["C", "F"]}, "city": {"type": "string", "description": "City"}}, "required": ["city"]}}}], "enable_thinking": true, "add_generation_prompt": true, "bos_token": "<bos>"})J",
     R"J(<bos><|turn>system
<|think|>
Be brief.<|tool>declaration:get_weather{description:<|"|>Weather for a city<|"|>,parameters:{properties:{city:{description:<|"|>City<|"|>,type:<|"|>STRING<|"|>},unit:{description:<|"|>Unit<|"|>,enum:[<|"|>C<|"|>,<|"|>F<|"|>],type:<|"|>STRING<|"|>}},required:[<|"|>city<|"|>],type:<|"|>OBJECT<|"|>}}<tool|><turn|>
<|turn>user
Weather in Paris?<turn|>
<|turn>model
<|channel>thought
need tool
<channel|><|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2,extra:{b:[1,<|"|>x<|"|>]},hourly:false,unit:<|"|>C<|"|>}<tool_call|><|tool_response>response:get_weather{value:<|"|>18C sunny<|"|>}<tool_response|>)J"},
    {"multi_turn_strips_thinking", R"J({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<|channel>thought\nhmm<channel|>Hello!"}, {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What is this? "}]}], "add_generation_prompt": true, "bos_token": "<bos>"})J",
     R"J(<bos><|turn>user
Hi<turn|>
<|turn>model
Hello!<turn|>
<|turn>user
<|image|>What is this?<turn|>
<|turn>model
)J"},
    {"developer_no_generation_prompt", R"J({"messages": [{"role": "developer", "content": "Rules"}, {"role": "user", "content": "x"}], "add_generation_prompt": false, "bos_token": "<bos>"})J",
     R"J(<bos><|turn>system
Rules<turn|>
<|turn>user
x<turn|>
)J"},
};

TEST(Gemma4Template, ParsesOnceAndRendersLikeJinja2) {
  const ChatTemplate tmpl(kGemma4StyleTemplate);
  for (const Conversation& c : kConversations) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(tmpl.render(nlohmann::ordered_json::parse(c.context)), c.expected);
  }
}

TEST(Gemma4Template, OutputFollowsTheSpecifiedTurnFormat) {
  const ChatTemplate tmpl(kGemma4StyleTemplate);
  const std::string out = tmpl.render(nlohmann::ordered_json::parse(kConversations[0].context));
  EXPECT_EQ(out.rfind("<bos><|turn>system\n<|think|>\n", 0), 0u) << out;
  EXPECT_NE(out.find("<|tool>declaration:get_weather{"), std::string::npos);
  EXPECT_NE(out.find("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>"), std::string::npos);
  EXPECT_NE(out.find("<|tool_response>response:get_weather{"), std::string::npos);
}

}  // namespace
}  // namespace lathe::jinja
