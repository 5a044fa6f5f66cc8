// Tests of Python's str()/repr()/json.dumps() formatting of values, which prompts must match.
#include "lathe/io/jinja/py_format.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lathe::jinja {
namespace {

TEST(PyFormat, FloatReprMatchesPython) {
  // Expected strings are Python 3's repr() of the same doubles.
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},       {0.1, "0.1"},         {0.1 + 0.2, "0.30000000000000004"}, {-2.5, "-2.5"},
      {1e16, "1e+16"},    {1e15, "1000000000000000.0"}, {1e-4, "0.0001"},          {1e-5, "1e-05"},
      {1.5e-7, "1.5e-07"}, {123456789.125, "123456789.125"}, {1e100, "1e+100"},    {-0.0, "-0.0"},
      {2.5e20, "2.5e+20"}, {INFINITY, "inf"},   {NAN, "nan"}};
  for (const auto& [d, expected] : cases) EXPECT_EQ(py_float_repr(d), expected);
}

TEST(PyFormat, StrAndRepr) {
  const Value list = Value::list({Value(1), Value("it's"), Value::none(), Value(true), Value(2.0), Value("a\nb")});
  EXPECT_EQ(py_str(list), R"([1, "it's", None, True, 2.0, 'a\nb'])");
  EXPECT_EQ(py_str(Value::tuple({Value(1)})), "(1,)");
  EXPECT_EQ(py_str(Value()), "");
  EXPECT_EQ(py_repr(Value("\x01\u00a0\u00e9")), "'\\x01\\xa0\u00e9'");
  Value d = Value::dict();
  d.object().set("k", Value("v"));
  EXPECT_EQ(py_str(d), "{'k': 'v'}");
}

TEST(PyFormat, JsonDumpsLikeTransformersTojson) {
  const auto j = nlohmann::ordered_json::parse(R"({"z": [1, 2.0, null, true], "a": {"é": "\u0001\"\\"}, "e": {}})");
  const Value v = Value::from_json(j);
  EXPECT_EQ(py_json_dumps(v, {}), R"({"z": [1, 2.0, null, true], "a": {"é": "\u0001\"\\"}, "e": {}})");
  JsonDumpOptions indented;
  indented.indent = "  ";
  indented.item_separator = ",";
  EXPECT_EQ(py_json_dumps(v, indented),
            "{\n  \"z\": [\n    1,\n    2.0,\n    null,\n    true\n  ],\n  \"a\": {\n    \"é\": \"\\u0001\\\"\\\\\"\n  },\n  \"e\": {}\n}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(py_json_dumps(Value("é😀"), ascii), R"("\u00e9\ud83d\ude00")");
}

}  // namespace
}  // namespace lathe::jinja
