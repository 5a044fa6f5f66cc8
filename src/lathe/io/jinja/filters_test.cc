// Filter tests: every supported filter against Jinja2's output (tojson as transformers defines it).
#include "lathe/io/jinja/filters.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/render_case_test_util.h"

namespace lathe::jinja {
namespace {

using testing_util::render_error;
using testing_util::RenderCase;

const RenderCase kFilterCases[] = {
    {"trim_and_case", R"J([{{ '  a b \n'|trim }}][{{ 'xxaxx'|trim('x') }}] {{ 'abC'|upper }} {{ 'AbC'|lower }} {{ 'hELLO world'|capitalize }} {{ 'hello big-world (x)'|title }})J",
     R"J({})J",
     R"J([a b][a] ABC abc Hello world Hello Big-World (X))J"},
    {"tojson_default_format", R"J({{ d|tojson }})J",
     R"J({"d": {"b": [1, 2.0, null, true, "é\"\n<>&'"], "a": {}, "c": []}})J",
     R"J({"b": [1, 2.0, null, true, "é\"\n<>&'"], "a": {}, "c": []})J"},
    {"tojson_indent", R"J({{ d|tojson(indent=2) }}|{{ [1, [2]]|tojson(indent=0) }}|{{ {}|tojson(indent=2) }})J",
     R"J({"d": {"b": [1, {"x": "y"}], "a": {}}})J",
     R"J({
  "b": [
    1,
    {
      "x": "y"
    }
  ],
  "a": {}
}|[
1,
[
2
]
]|{})J"},
    {"tojson_options", R"J({{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }} {{ 'é'|tojson(ensure_ascii=true) }})J",
     R"J({"d": {"b": 1, "a": [1, 2]}})J",
     R"J({"a": [1, 2], "b": 1} {"b":1,"a":[1,2]} "\u00e9")J"},
    {"tojson_scalars", R"J({{ 1|tojson }} {{ 1.0|tojson }} {{ 'x'|tojson }} {{ none|tojson }} {{ false|tojson }} {{ 1e100|tojson }})J",
     R"J({})J",
     R"J(1 1.0 "x" null false 1e+100)J"},
    {"length_and_count", R"J({{ 'héllo'|length }} {{ [1, 2]|count }} {{ d|length }} {{ missing|length }})J",
     R"J({"d": {"a": 1}})J",
     R"J(5 2 1 0)J"},
    {"join", R"J({{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ users|join('/', attribute='name') }})J",
     R"J({"users": [{"name": "bob", "age": 30, "tags": ["x"]}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}]})J",
     R"J(1, 2, 3 ab bob/Al/cy)J"},
    {"items_and_dictsort", R"J({{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(true) }} {{ d|dictsort(by='value', reverse=true) }})J",
     R"J({"d": {"b": 2, "A": 3, "a": 1}})J",
     R"J([('b', 2), ('A', 3), ('a', 1)] [('A', 3), ('a', 1), ('b', 2)] [('A', 3), ('a', 1), ('b', 2)] [('A', 3), ('b', 2), ('a', 1)])J"},
    {"first_last", R"J({{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} [{{ []|first }}])J",
     R"J({})J",
     R"J(1 3 a [])J"},
    {"replace", R"J({{ 'aXbXc'|replace('X', '-') }} {{ 'aXbXc'|replace('X', '', 1) }})J",
     R"J({})J",
     R"J(a-b-c abXc)J"},
    {"default", R"J({{ missing|default('dflt') }} {{ none|default('x') }} {{ ''|default('x', true) }} {{ 0|d('zero', true) }} {{ 'v'|d('x') }})J",
     R"J({})J",
     R"J(dflt None x zero v)J"},
    {"string_int_float", R"J({{ 1|string ~ 2 }} {{ '42'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(0, 16) }} {{ 2.9|int }} {{ '2.5'|float }} {{ 3|float }} {{ 'x'|float }} {{ true|int }})J",
     R"J({})J",
     R"J(12 43 3 7 26 2 2.5 3.0 0.0 1)J"},
    {"list", R"J({{ 'abc'|list }} {{ d|list }} {{ (1, 2)|list }})J",
     R"J({"d": {"k": 1, "j": 2}})J",
     R"J(['a', 'b', 'c'] ['k', 'j'] [1, 2])J"},
    {"map", R"J({{ users|map(attribute='name')|list }} {{ ['a', 'b']|map('upper')|join }} {{ users|map(attribute='tags', default=[])|list }} {{ [' a ', 'b ']|map('trim')|list }})J",
     R"J({"users": [{"name": "bob", "age": 30, "tags": ["x"]}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}]})J",
     R"J(['bob', 'Al', 'cy'] AB [['x'], [], []] ['a', 'b'])J"},
    {"select_reject", R"J({{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ [1, 5, 10]|select('gt', 3)|list }} {{ [1, 2, 3]|select('divisibleby', 3)|list }})J",
     R"J({})J",
     R"J([1, 3] [1, 3] [1, 'a'] [5, 10] [3])J"},
    {"selectattr_rejectattr", R"J({{ users|selectattr('age', 'equalto', 30)|map(attribute='name')|join(',') }} {{ users|rejectattr('tags')|map(attribute='name')|join(',') }} {{ users|selectattr('tags', 'defined')|list|length }})J",
     R"J({"users": [{"name": "bob", "age": 30, "tags": ["x"]}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}]})J",
     R"J(bob,cy Al,cy 1)J"},
    {"round_abs", R"J({{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(1, 'floor') }} {{ 5|round }} {{ -3|abs }} {{ -2.5|abs }})J",
     R"J({})J",
     R"J(2.0 4.0 2.67 3.0 2.9 5 3 2.5)J"},
    {"safe_escape_wordcount", R"J({{ '<b>'|safe }} {{ '<a href="x">&\'</a>'|e }} {{ 'hello world, foo_bar 42'|wordcount }})J",
     R"J({})J",
     R"J(<b> &lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt; 4)J"},
    {"sort_unique_reverse", R"J({{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|sort }} {{ ['b', 'A', 'a']|sort(case_sensitive=true) }} {{ users|sort(attribute='age,name'.split(',')[0], reverse=true)|map(attribute='name')|list }} {{ ['b', 'A', 'a', 'B']|unique|list }} {{ [1, 2]|reverse|list }} {{ 'abc'|reverse }})J",
     R"J({"users": [{"name": "bob", "age": 30, "tags": ["x"]}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}]})J",
     R"J([1, 2, 3] ['A', 'a', 'b'] ['A', 'a', 'b'] ['bob', 'cy', 'Al'] ['b', 'A'] [2, 1] cba)J"},
    {"min_max_sum", R"J({{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|min }} {{ users|max(attribute='age') }} {{ [1, 2.5]|sum }} {{ users|sum(attribute='age') }})J",
     R"J({"users": [{"name": "bob", "age": 30, "tags": ["x"]}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}]})J",
     R"J(1 3 A {'name': 'bob', 'age': 30, 'tags': ['x']} 3.5 85)J"},
    {"indent", R"J([{{ 'a\nb\n\nc'|indent(2) }}][{{ 'a\nb'|indent(2, true) }}][{{ 'a\n\nb'|indent(2, blank=true) }}][{{ 'x\ny'|indent('> ') }}])J",
     R"J({})J",
     "[a\n  b\n\n  c][  a\n  b][a\n  \n  b][x\n> y]"},
    {"format_and_center", R"J({{ '%s-%d-%.2f %r %%'|format('a', 3, 1.5, 'q') }} [{{ 'ab'|center(6) }}])J",
     R"J({})J",
     R"J(a-3-1.50 'q' % [  ab  ])J"},
    {"attr_filter", R"J({{ d|attr('k') }})J",
     R"J({"d": {"k": "v"}})J",
     R"J()J"},
    {"filter_chains", R"J({{ messages|map(attribute='role')|unique|list|join(',')|upper }})J",
     R"J({"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]})J",
     R"J(USER,ASSISTANT)J"},
};

TEST(Filters, MatchJinja2) { testing_util::expect_renders(kFilterCases); }

TEST(Filters, UnknownAndUnsupportedFilters) {
  const ChatTemplateError unknown = render_error("ok\n{% if false %}{{ x | nosuchfilter }}{% endif %}");
  EXPECT_EQ(unknown.kind(), ChatTemplateError::Kind::kSyntax);  // checked at parse time, as Jinja2
  EXPECT_EQ(unknown.line(), 2);
  EXPECT_EQ(unknown.column(), 22);
  const ChatTemplateError unsupported = render_error("{{ 'abc' | truncate(2) }}");
  EXPECT_NE(std::string(unsupported.what()).find("not supported"), std::string::npos) << unsupported.what();
}

TEST(Filters, BadArgumentsAreErrors) {
  for (const char* source : {"{{ 1|dictsort }}", "{{ 'a'|round }}", "{{ [1]|map }}", "{{ 5|length }}", "{{ 1|items }}",
                             "{{ [1, 'a']|sort }}",
                             // fuzz finding: a non-int, non-str indent threw std::bad_variant_access
                             "{{ 1|tojson(x) }}", "{{ 1|tojson(indent=1.5) }}", "{{ 1|tojson([2]) }}"}) {
    SCOPED_TRACE(source);
    EXPECT_EQ(render_error(source).kind(), ChatTemplateError::Kind::kRuntime);
  }
}

}  // namespace
}  // namespace lathe::jinja
