// Jinja test tests (`is string`, `is defined`, `is divisibleby`, ...), against Jinja2.
#include "lathe/io/jinja/predicates.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/render_case_test_util.h"

namespace lathe::jinja {
namespace {

using testing_util::render_error;
using testing_util::RenderCase;

const RenderCase kTestCases[] = {
    {"type_tests", R"J({% for v in values %}{{ v is string }}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is boolean }}{{ v is none }}{{ v is mapping }}{{ v is sequence }}{{ v is iterable }}|{% endfor %})J",
     R"J({"values": ["s", 1, 1.5, true, null, {"a": 1}, [1]]})J",
     R"J(TrueFalseFalseFalseFalseFalseFalseTrueTrue|FalseTrueTrueFalseFalseFalseFalseFalseFalse|FalseTrueFalseTrueFalseFalseFalseFalseFalse|FalseTrueFalseFalseTrueFalseFalseFalseFalse|FalseFalseFalseFalseFalseTrueFalseFalseFalse|FalseFalseFalseFalseFalseFalseTrueTrueTrue|FalseFalseFalseFalseFalseFalseFalseTrueTrue|)J"},
    {"defined_undefined", R"J({{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ d.k is defined }} {{ d.z is not defined }})J",
     R"J({"x": null, "d": {"k": 1}})J",
     R"J(True False True True True)J"},
    {"true_false", R"J({{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ enable_thinking is false }})J",
     R"J({"enable_thinking": false})J",
     R"J(True False True False True)J"},
    {"numbers", R"J({{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ loop_n is not divisibleby 2 }})J",
     R"J({"loop_n": 5})J",
     R"J(True True True False True)J"},
    {"comparison_tests", R"J({{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is ge 2 }} {{ 3 is gt 4 }} {{ 2 is in [1, 2] }} {{ 'x' is in 'xyz' }})J",
     R"J({})J",
     R"J(True False True True True False True True)J"},
    {"case_tests", R"J({{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'Abc' is lower }})J",
     R"J({})J",
     R"J(True True False)J"},
    {"sameas_and_callable", R"J({{ none is sameas none }} {{ range is callable }} {{ 'x' is callable }})J",
     R"J({})J",
     R"J(True True False)J"},
    {"tests_in_conditions", R"J({% if m.content is string and m.content is not none %}str{% endif %}{% if m.tool_calls is defined and m.tool_calls %}calls{% else %}-{% endif %})J",
     R"J({"m": {"content": "c"}})J",
     R"J(str-)J"},
};

TEST(Predicates, MatchJinja2) { testing_util::expect_renders(kTestCases); }

TEST(Predicates, UnknownTestFailsAtParseTime) {
  const ChatTemplateError e = render_error("{{ 1 is nosuchtest }}");
  EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kSyntax);
  EXPECT_EQ(e.column(), 9);
}

TEST(Predicates, DirectCalls) {
  CallArgs three;
  three.positional.emplace_back(3);
  EXPECT_TRUE(apply_test("divisibleby", Value(9), three));
  EXPECT_FALSE(apply_test("divisibleby", Value(10), three));
  EXPECT_TRUE(apply_test("number", Value(true), {}));  // bool is a Number in Python
  EXPECT_FALSE(apply_test("integer", Value(true), {}));
  EXPECT_TRUE(apply_test("sequence", Value("s"), {}));
  EXPECT_THROW(apply_test("divisibleby", Value(1), {}), EvalError);
}

}  // namespace
}  // namespace lathe::jinja
