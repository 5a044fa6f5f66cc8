// Expression tests: Python arithmetic and comparison semantics, precedence (filters bind tighter
// than arithmetic), subscripts and slices, literals and value printing.
#include "lathe/io/jinja/operators.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/render_case_test_util.h"

namespace lathe::jinja {
namespace {

using testing_util::render_error;
using testing_util::RenderCase;

const RenderCase kExpressionCases[] = {
    {"arithmetic", R"J({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }})J",
     R"J({})J",
     R"J(7 9 3.5 2.0 3 -4 1 2 1024 64 4)J"},
    {"float_arithmetic", R"J({{ 0.1 + 0.2 }} {{ 1.5 * 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789.0 * 10 }})J",
     R"J({})J",
     R"J(0.30000000000000004 3.0 3.0 0.5 0.5 1e+16 1e-05 1234567890.0)J"},
    {"string_ops", R"J({{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ 'a' ~ 1 ~ none ~ true }} {{ [1] + [2] }} {{ [0] * 3 }})J",
     R"J({})J",
     R"J(abcd ababab xxx a1NoneTrue [1, 2] [0, 0, 0])J"},
    {"filters_bind_tighter_than_minus", R"J({{ messages|length - 1 }} {{ -3|abs }} {{ 'a b'|upper ~ 'c' }})J",
     R"J({"messages": [1, 2, 3]})J",
     R"J(2 3 A Bc)J"},
    {"comparisons", R"J({{ 1 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ 1 != 2 }} {{ 2 >= 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ none == none }} {{ true == 1 }})J",
     R"J({})J",
     R"J(True True True True True True True False True True)J"},
    {"in_and_not_in", R"J({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }} {{ 'x' not in 'xyz' }})J",
     R"J({"d": {"k": 1}})J",
     R"J(True True True True False)J"},
    {"boolean_logic", R"J({{ not true }} {{ not 0 }} {{ true and not false }} {{ not (1 == 1 and 2 == 3) }})J",
     R"J({})J",
     R"J(False True True True)J"},
    {"subscripts", R"J({{ l[0] }} {{ l[-1] }} {{ d['k'] }} {{ d.k }} {{ m[0].role }} {{ m.0.role }} {{ 'abc'[1] }})J",
     R"J({"l": [1, 2, 3], "d": {"k": "v"}, "m": [{"role": "user"}]})J",
     R"J(1 3 v v user user b)J"},
    {"slices", R"J({{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:] }} {{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ l[3:0:-1] }})J",
     R"J({"l": [1, 2, 3, 4, 5]})J",
     R"J([2, 3, 4, 5] [1, 2, 3, 4] [5, 4, 3, 2, 1] [1, 3, 5] [4, 5] [] él cba [4, 3, 2])J"},
    {"literals", R"J({{ [1, 'two', [3]] }} {{ {'a': 1, 'b': [true, none]} }} {{ (1, 2) }} {{ () }} {{ [] }} {{ {} }} {{ True }} {{ False }} {{ None }})J",
     R"J({})J",
     R"J([1, 'two', [3]] {'a': 1, 'b': [True, None]} (1, 2) () [] {} True False None)J"},
    {"json_numbers_keep_type", R"J({{ i }} {{ f }} {{ g }} {{ i / 2 }} {{ big }})J",
     R"J({"i": 3, "f": 2.0, "g": 0.5, "big": 12345678901234})J",
     R"J(3 2.0 0.5 1.5 12345678901234)J"},
    {"unicode_strings", R"J({{ s|length }} {{ s[0] }} {{ s|upper }} {{ s[::-1] }})J",
     R"J({"s": "été✓"})J",
     R"J(4 é ÉTÉ✓ ✓été)J"},
};

TEST(Expressions, MatchJinja2) { testing_util::expect_renders(kExpressionCases); }

TEST(Expressions, TypeErrorsAreReported) {
  for (const char* source : {"{{ 'a' - 1 }}", "{{ [1] + 'a' }}", "{{ 1 < 'a' }}", "{{ -'a' }}", "{{ 1 in 'abc' }}",
                             "{{ none.x.y }}", "{{ 5 // 0 }}", "{{ 9223372036854775807 + 1 }}", "{{ [1][::0] }}"}) {
    SCOPED_TRACE(source);
    EXPECT_EQ(render_error(source).kind(), ChatTemplateError::Kind::kRuntime);
  }
}

TEST(Expressions, SliceFollowsPythonIndexRules) {
  const Value l = Value::list({Value(1), Value(2), Value(3), Value(4)});
  auto ints = [](const Value& v) {
    std::vector<int64_t> out;
    for (const Value& x : v.array().items) out.push_back(x.as_int());
    return out;
  };
  EXPECT_EQ(ints(slice(l, std::nullopt, std::nullopt, -1)), (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_EQ(ints(slice(l, -100, 2, std::nullopt)), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ints(slice(l, 10, std::nullopt, -2)), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(ints(slice(l, 1, 1, std::nullopt)), (std::vector<int64_t>{}));
}

}  // namespace
}  // namespace lathe::jinja
