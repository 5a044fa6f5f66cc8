// Interpreter tests: control flow, loops and the `loop` object, scoping of set/namespace, macros,
// filter blocks, globals; then render limits and runtime error kinds and positions.
#include "lathe/io/jinja/interpreter.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/render_case_test_util.h"

namespace lathe::jinja {
namespace {

using nlohmann::ordered_json;
using testing_util::render_error;
using testing_util::RenderCase;

const RenderCase kControlCases[] = {
    {"if_elif_else", R"J({% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %};{% endfor %})J",
     R"J({})J",
     R"J(one;two;many;)J"},
    {"loop_variables", R"J({% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }} {% endfor %})J",
     R"J({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]})J",
     "1/0/4/3/4/True/False 2/1/3/2/4/False/False 3/2/2/1/4/False/False 4/3/1/0/4/False/True "},
    {"loop_previtem_nextitem", R"J({% for x in 'abc' %}[{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}]{% endfor %})J",
     R"J({})J",
     R"J([<a>b][a<b>c][b<c>])J"},
    {"loop_cycle", R"J({% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %})J",
     R"J({})J",
     R"J(ababa)J"},
    {"for_else_runs_on_empty", R"J({% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}x{% else %}empty{% endfor %})J",
     R"J({})J",
     R"J(empty|x)J"},
    {"for_filter_counts_after_filtering", R"J({% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.content }}/{{ loop.length }} {% endfor %})J",
     R"J({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]})J",
     "1:U1/3 2:A1/3 3:U2/3 "},
    {"for_unpacks_pairs", R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for (a, b) in [[1, 2]] %}{{ a + b }}{% endfor %})J",
     R"J({"d": {"z": 1, "a": 2}})J",
     R"J(z=1;a=2;3)J"},
    {"for_over_dict_gives_keys", R"J({% for k in d %}{{ k }}{% endfor %})J",
     R"J({"d": {"z": 1, "a": 2}})J",
     R"J(za)J"},
    {"nested_loops_shadow_loop", R"J({% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{% endfor %}{{ loop.index }} {% endfor %})J",
     R"J({})J",
     "121 122 "},
    {"break_and_continue", R"J({% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %})J",
     R"J({})J",
     R"J(0246)J"},
    {"set_in_loop_does_not_leak", R"J({% set y = 1 %}{% for x in [1, 2] %}{{ y }}{% set y = 5 %}{{ y }}{% endfor %}{{ y }})J",
     R"J({})J",
     R"J(15151)J"},
    {"set_in_if_is_visible", R"J({% if true %}{% set y = 'in' %}{% endif %}{{ y }})J",
     R"J({})J",
     R"J(in)J"},
    {"namespace_carries_state_out_of_loops", R"J({% set ns = namespace(n=0, last='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.n }} {{ ns.last }})J",
     R"J({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]})J",
     R"J(4 user)J"},
    {"namespace_reverse_scan_like_qwen3", R"J({% set ns = namespace(idx=messages|length - 1) %}{% for m in messages[::-1] %}{% set i = (messages|length - 1) - loop.index0 %}{% if m.role == 'user' and ns.idx == messages|length - 1 %}{% set ns.idx = i %}{% endif %}{% endfor %}{{ ns.idx }})J",
     R"J({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]})J",
     R"J(1)J"},
    {"tuple_set", R"J({% set a, b = 1, 'x' %}{{ a }}{{ b }})J",
     R"J({})J",
     R"J(1x)J"},
    {"block_set_with_filter", R"J({% set body | upper %}
  hello {{ name }}
{% endset %}[{{ body }}])J",
     R"J({"name": "bob"})J",
     R"J([  HELLO BOB
])J"},
    {"block_set_plain", R"J({% set x %}a{{ 1 + 1 }}b{% endset %}{{ x }}{{ x|length }})J",
     R"J({})J",
     R"J(a2b3)J"},
    {"macro_with_defaults_and_kwargs", R"J({% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', 'Hi') }} {{ greet('c', punct='?') }})J",
     R"J({})J",
     R"J(Hello, a! Hi, b! Hello, c?)J"},
    {"macro_recursion", R"J({% macro fmt(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v|dictsort %}{{ k }}:{{ fmt(x) }}{% if not loop.last %},{% endif %}{% endfor %}{{ '}' }}{% elif v is sequence and v is not string %}[{% for x in v %}{{ fmt(x) }}{{ ',' if not loop.last }}{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ fmt(d) }})J",
     R"J({"d": {"b": [1, {"c": true}], "a": "s"}})J",
     R"J({a:s,b:[1,{c:True}]})J"},
    {"macro_sees_globals", R"J({% macro f() %}{{ bos_token }}{% endmacro %}{{ f() }})J",
     R"J({"bos_token": "<s>"})J",
     R"J(<s>)J"},
    {"macro_result_is_filterable", R"J({% macro f() %}  x  {% endmacro %}[{{ f() | trim }}])J",
     R"J({})J",
     R"J([x])J"},
    {"filter_block", R"J({% filter upper %}abc {{ 'd' }}{% endfilter %})J",
     R"J({})J",
     R"J(ABC D)J"},
    {"inline_if", R"J({{ 'a' if true else 'b' }}{{ 'c' if false else 'd' }}[{{ 'e' if false }}])J",
     R"J({})J",
     R"J(ad[])J"},
    {"undefined_prints_empty", R"J([{{ missing }}][{{ d.missing }}][{{ l[5] }}])J",
     R"J({"d": {}, "l": []})J",
     R"J([][][])J"},
    {"none_prints_None", R"J({{ none }} {{ d.x }} {{ True }} {{ 1.0 }} {{ [1, 'a', none] }} {{ {'k': 1.5} }} {{ (1,) }})J",
     R"J({"d": {"x": null}})J",
     R"J(None None True 1.0 [1, 'a', None] {'k': 1.5} (1,))J"},
    {"and_or_return_operands", R"J({{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}| {{ none or [] }})J",
     R"J({})J",
     R"J(x b | [])J"},
    {"strftime_now", R"J({{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %b %Y') }})J",
     R"J({})J",
     R"J(2024-03-05 14:07:09 05 Mar 2024)J"},
    {"range_forms", R"J({{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }})J",
     R"J({})J",
     R"J([0, 1, 2] [1, 3, 5] [5, 3, 1])J"},
    {"dict_global", R"J({{ dict(a=1, b='x') }})J",
     R"J({})J",
     R"J({'a': 1, 'b': 'x'})J"},
    {"extra_kwargs_are_variables", R"J({{ enable_thinking }} {{ custom }})J",
     R"J({"enable_thinking": false, "custom": [1]})J",
     R"J(False [1])J"},
};

TEST(Interpreter, StatementsMatchJinja2) { testing_util::expect_renders(kControlCases); }

TEST(Interpreter, GenerationTagRendersItsBody) {
  // transformers' {% generation %} marks assistant tokens for masks; the text is unchanged.
  EXPECT_EQ(render_chat_template("a{% generation %}b{{ 1 }}{% endgeneration %}c", ordered_json::object()), "ab1c");
}

TEST(Interpreter, RaiseExceptionIsUserFacing) {
  const ChatTemplateError e = render_error("line1\n{{ raise_exception('Roles must alternate') }}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRaised);
  EXPECT_EQ(e.reason(), "Roles must alternate");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 4);
}

TEST(Interpreter, RuntimeErrorsGiveLineAndColumn) {
  struct Bad {
    const char* source;
    int line, column;
    const char* fragment;
  };
  const Bad cases[] = {
      {"{{ x.y }}", 1, 5, "'x' is undefined"},
      {"ok\n{{ 1 + 'a' }}", 2, 6, "unsupported operand"},
      {"{% for x in 5 %}{% endfor %}", 1, 1, "not iterable"},
      {"{% set ns = 1 %}\n  {% set ns.a = 2 %}", 2, 3, "non-namespace"},
      {"{{ 1 / 0 }}", 1, 6, "division by zero"},
      {"{{ [1]|tojson }}{{ missing|tojson }}", 1, 27, "not JSON serializable"},
      {"{{ 'x'.nosuch() }}", 1, 7, "has no attribute 'nosuch'"},
      {"{% for a, b in [[1]] %}{% endfor %}", 1, 1, "not enough values to unpack"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.source);
    const ChatTemplateError e = render_error(b.source);
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kRuntime) << e.what();
    EXPECT_EQ(e.line(), b.line) << e.what();
    EXPECT_EQ(e.column(), b.column) << e.what();
    EXPECT_NE(std::string(e.what()).find(b.fragment), std::string::npos) << e.what();
  }
}

TEST(Interpreter, RunawayRecursionStops) {
  RenderOptions o;
  o.max_call_depth = 50;
  const ChatTemplateError e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ordered_json::object(), o);
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kLimit);
  EXPECT_NE(std::string(e.what()).find("nested deeper than 50"), std::string::npos) << e.what();
  // Within the limit, recursion works.
  EXPECT_EQ(render_chat_template("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}",
                                 ordered_json::object(), o),
            "54321");
}

// Fuzz finding: macro recursion inside nested blocks multiplies the interpreter's stack depth (the call
// limit alone let 64 calls x 60 nested ifs overflow the stack under AddressSanitizer).
TEST(Interpreter, DeepRecursionInNestedBlocksStops) {
  RenderOptions o;
  o.max_render_depth = 100;
  std::string body;
  for (int i = 0; i < 60; ++i) body += "{% if true %}";
  body += "{{ f(n + 1) if n < 200 else n }}";
  for (int i = 0; i < 60; ++i) body += "{% endif %}";
  const ChatTemplateError e = render_error("{% macro f(n) %}" + body + "{% endmacro %}{{ f(0) }}", ordered_json::object(), o);
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kLimit);
  EXPECT_NE(std::string(e.what()).find("recursion deeper than 100"), std::string::npos) << e.what();
}

TEST(Interpreter, ExponentialMacroFanOutHitsTheStepLimit) {
  RenderOptions o;
  o.max_loop_iterations = 10000;
  const ChatTemplateError e = render_error(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}", ordered_json::object(), o);
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kLimit);
}

TEST(Interpreter, LoopIterationLimit) {
  RenderOptions o;
  o.max_loop_iterations = 1000;
  EXPECT_NO_THROW(render_chat_template("{% for i in range(999) %}{% endfor %}", ordered_json::object(), o));
  const ChatTemplateError e =
      render_error("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", ordered_json::object(), o);
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kLimit);
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 26);  // the inner loop, where the count ran out
}

TEST(Interpreter, OutputAndListSizeLimits) {
  RenderOptions o;
  o.max_output_bytes = 1000;
  o.max_items = 500;
  EXPECT_EQ(render_error("{% for i in range(400) %}xyz{% endfor %}", ordered_json::object(), o).kind(),
            ChatTemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{{ 'ab' * 100000 }}", ordered_json::object(), o).kind(), ChatTemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{{ range(1000)|length }}", ordered_json::object(), o).kind(), ChatTemplateError::Kind::kLimit);
  EXPECT_EQ(render_error("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                         ordered_json::object(), o)
                .kind(),
            ChatTemplateError::Kind::kLimit);
  EXPECT_EQ(render_chat_template("{{ 'ab' * 3 }}", ordered_json::object(), o), "ababab");
}

TEST(Interpreter, SelfReferencingNamespaceFailsCleanly) {
  const ChatTemplateError e = render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_NE(std::string(e.what()).find("nested too deeply"), std::string::npos) << e.what();
}

TEST(Interpreter, ParsedTemplateRendersManyContexts) {
  const ChatTemplate t("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  EXPECT_EQ(t.render({{"messages", ordered_json::array({{{"role", "user"}, {"content", "a"}}})}}), "user:a;");
  EXPECT_EQ(t.render({{"messages", ordered_json::array()}}), "");
  EXPECT_THROW(t.render(ordered_json::array()), ChatTemplateError);
}

}  // namespace
}  // namespace lathe::jinja
