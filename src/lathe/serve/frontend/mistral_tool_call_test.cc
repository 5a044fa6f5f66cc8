// Mistral tool calls: [TOOL_CALLS][{...}, ...] (tokenizers v3-v7) and [TOOL_CALLS]name[ARGS]{...}
// (v11+), with content before, several calls, malformed and unfinished calls, held-back marker
// prefixes; every text also fed byte by byte and at random splits.
#include <gtest/gtest.h>

#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

using parser_test::parse_tools_all_ways;
using parser_test::ToolParse;

constexpr ToolCallFormat kFormat = ToolCallFormat::kMistral;

TEST(MistralToolCalls, PlainContentPassesThrough) {
  const std::string text = "See [1] and [TOOLS] or [TOOL_CALL] - no calls.\n";
  ToolParse r = parse_tools_all_ways(kFormat, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(MistralToolCalls, ArrayFormOneCall) {
  ToolParse r = parse_tools_all_ways(kFormat, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 3.5, \"b\": 4}}]");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].id, "call_0");
  EXPECT_EQ(r.calls[0].name, "add");
  EXPECT_EQ(r.calls[0].arguments, R"({"a":3.5,"b":4})");
}

TEST(MistralToolCalls, ArrayFormContentThenTwoCalls) {
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "Hello [TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, "
                                     "{\"arguments\": {\"x\": \"]}\"}, \"name\": \"b\", \"id\": \"abcdefghi\"}]");
  EXPECT_EQ(r.content, "Hello");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_EQ(r.calls[1].id, "call_1");  // the model's own id is not used
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"x":"]}"})");
}

TEST(MistralToolCalls, NamedFormTwoCalls) {
  ToolParse r = parse_tools_all_ways(
      kFormat, "[TOOL_CALLS]add[ARGS]{\"a\": 3.5, \"b\": 4}[TOOL_CALLS]multiply[ARGS]{\"a\": 3, \"b\": 6}");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "add");
  EXPECT_EQ(r.calls[0].arguments, R"({"a":3.5,"b":4})");
  EXPECT_EQ(r.calls[1].name, "multiply");
  EXPECT_EQ(r.calls[1].arguments, R"({"a":3,"b":6})");
}

TEST(MistralToolCalls, NamedFormWithoutArgsTokenAndWithCallId) {
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}"
                                     "[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{\"k\": \"v\"}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.calls[1].name, "f");
  EXPECT_EQ(r.calls[1].arguments, R"({"k":"v"})");
}

TEST(MistralToolCalls, AwkwardArgumentsSerialiseCompactly) {
  ToolParse r = parse_tools_all_ways(
      kFormat,
      "[TOOL_CALLS]run[ARGS]{\"code\": \"if (x) { return \\\"}\\\"; }\", \"nested\": {\"l\": [[], {}, [1, [2]]]}, "
      "\"u\": \"\xF0\x9F\x98\x80 \\u4e16\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            "{\"code\":\"if (x) { return \\\"}\\\"; }\",\"nested\":{\"l\":[[],{},[1,[2]]]},\"u\":\"\xF0\x9F\x98\x80 \xE4\xB8\x96\"}");
}

TEST(MistralToolCalls, MalformedAndUnfinishedCallsAreContent) {
  for (const std::string text : {
           "[TOOL_CALLS] not json at all",
           "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}",       // the array never closes
           "[TOOL_CALLS][{\"arguments\": {}}]",                       // no name
           "[TOOL_CALLS][]",
           "[TOOL_CALLS]f[ARGS]{\"a\": }",
           "[TOOL_CALLS]f[ARGS][1]",
           "[TOOL_CALLS]f[OTHER]{}",
           "Sure [TOOL_CALLS]f[ARGS]{\"a\": 1",
       }) {
    SCOPED_TRACE(text);
    ToolParse r = parse_tools_all_ways(kFormat, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(MistralToolCalls, ContentAfterTheCalls) {
  ToolParse r = parse_tools_all_ways(kFormat, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]\nextra trailing data");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "extra trailing data");
}

TEST(MistralToolCalls, HeldBackPrefixThatIsNotAMarkerIsReleased) {
  ToolCallParser parser(kFormat, parser_test::counting_ids());
  EXPECT_EQ(parser.feed("Use [TOOL").content, "Use");
  EXPECT_EQ(parser.feed("S] here").content, " [TOOLS] here");
  EXPECT_EQ(parser.finish().content, "");
  EXPECT_EQ(parser.n_calls(), 0);
}

}  // namespace
}  // namespace lathe::serve
