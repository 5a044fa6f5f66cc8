// Hermes / Qwen tool calls (<tool_call>{json}</tool_call>): content, one and several calls, awkward
// arguments, malformed and unfinished calls, held-back marker prefixes; every text also fed byte by
// byte and at random splits.
#include <gtest/gtest.h>

#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

using parser_test::parse_tools;
using parser_test::parse_tools_all_ways;
using parser_test::ToolParse;

constexpr ToolCallFormat kFormat = ToolCallFormat::kHermes;

TEST(HermesToolCalls, PlainContentPassesThrough) {
  const std::string text = "Hello, world!\n\nNo tools <b>here</b>, only text < and > signs.\n";
  ToolParse r = parse_tools_all_ways(kFormat, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(HermesToolCalls, ContentThenOneCall) {
  ToolParse r = parse_tools_all_ways(
      kFormat,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"C\"}}\n"
      "</tool_call>");
  EXPECT_EQ(r.content, "Let me check.");  // the template's "\n" before the call is dropped
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].index, 0);
  EXPECT_EQ(r.calls[0].id, "call_0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","unit":"C"})");
}

TEST(HermesToolCalls, TwoCallsGetIndexesZeroAndOne) {
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                                     "<tool_call>\n{\"arguments\": {\"x\": 1}, \"name\": \"b\"}\n</tool_call>\n");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_EQ(r.calls[1].id, "call_1");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"x":1})");
}

TEST(HermesToolCalls, AwkwardArgumentsSerialiseCompactly) {
  // Nested objects and arrays, escaped quotes, braces and a marker-like text inside strings, non-ASCII
  // text and a \u escape; numbers re-printed by nlohmann (2.50 -> 2.5, 1e2 -> 100.0).
  ToolParse r = parse_tools_all_ways(
      kFormat,
      "<tool_call>\n{\"name\": \"run\", \"arguments\": {\"q\": {\"a\": [1, 2.50, {\"b\": null}], "
      "\"s\": \"say \\\"hi\\\" {not a brace} ] <tool_call\"}, \"u\": \"h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C "
      "\xF0\x9F\x98\x80\", \"e\": \"\\u00e9\", \"n\": 1e2, \"t\": true}}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            "{\"q\":{\"a\":[1,2.5,{\"b\":null}],\"s\":\"say \\\"hi\\\" {not a brace} ] <tool_call\"},"
            "\"u\":\"h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80\",\"e\":\"\xC3\xA9\",\"n\":100.0,\"t\":true}");
  EXPECT_EQ(r.content, "");
}

TEST(HermesToolCalls, ArgumentsAsStringAndParametersKeyAreAccepted) {
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}</tool_call>"
                                     "<tool_call>{\"name\": \"g\", \"parameters\": {\"b\": \"c\"}}</tool_call>"
                                     "<tool_call>{\"name\": \"h\"}</tool_call>");
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":[1,2]})");
  EXPECT_EQ(r.calls[1].arguments, R"({"b":"c"})");
  EXPECT_EQ(r.calls[2].arguments, "{}");
}

TEST(HermesToolCalls, MalformedCallsAreContentAsWritten) {
  for (const std::string text : {
           "Try: <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call> done",
           "<tool_call>not json</tool_call>",
           "<tool_call>{\"arguments\": {}}</tool_call>",                       // no name
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",     // arguments not an object
           "<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing</tool_call>",
       }) {
    SCOPED_TRACE(text);
    ToolParse r = parse_tools_all_ways(kFormat, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(HermesToolCalls, MalformedCallThenValidCall) {
  ToolParse r = parse_tools_all_ways(
      kFormat, "<tool_call>oops</tool_call> then <tool_call>{\"name\": \"f\", \"arguments\": {\"k\": 1}}</tool_call>");
  EXPECT_EQ(r.content, "<tool_call>oops</tool_call> then");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].index, 0);
  EXPECT_EQ(r.calls[0].arguments, R"({"k":1})");
}

TEST(HermesToolCalls, AStartMarkerInsideACallAbandonsTheFirst) {
  ToolParse r = parse_tools_all_ways(
      kFormat, "<tool_call>{\"name\": <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(r.content, "<tool_call>{\"name\":");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
}

TEST(HermesToolCalls, UnfinishedCallAtTheEndBecomesContent) {
  const std::string text = "Sure <tool_call>\n{\"name\": \"f\", \"argu";
  ToolParse r = parse_tools_all_ways(kFormat, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(HermesToolCalls, CompleteCallWithoutEndMarkerAtTheEndIsACall) {
  ToolParse r = parse_tools_all_ways(kFormat, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"a":1})");
}

TEST(HermesToolCalls, HeldBackPrefixThatIsNotAMarkerIsReleased) {
  ToolCallParser parser(kFormat, parser_test::counting_ids());
  EXPECT_EQ(parser.feed("I use <tool").content, "I use");  // " <tool" may start a call
  EXPECT_EQ(parser.feed("s> here").content, " <tools> here");
  EXPECT_EQ(parser.finish().content, "");
  EXPECT_EQ(parser.n_calls(), 0);
}

TEST(HermesToolCalls, ContentBetweenAndAfterCalls) {
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "A\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\nB "
                                     "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>\n\n C\n");
  EXPECT_EQ(r.content, "ABC\n");
  ASSERT_EQ(r.calls.size(), 2u);
}

TEST(HermesToolCalls, IncompleteUtf8IsHeldBackAndCallsStreamWhole) {
  ToolCallParser parser(kFormat, parser_test::counting_ids());
  EXPECT_EQ(parser.feed("caf\xC3").content, "caf");  // the first byte of é waits for the second
  EXPECT_EQ(parser.feed("\xA9 <tool_call>{\"name\": \"f\", ").content, "\xC3\xA9");
  ParsedDelta d = parser.feed("\"arguments\": {\"x\": \"\xE4\xB8");
  EXPECT_TRUE(d.content.empty() && d.tool_calls.empty());
  d = parser.feed("\x96\"}}</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id, "call_0");
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"x\":\"\xE4\xB8\x96\"}");
  EXPECT_EQ(parser.n_calls(), 1);
}

}  // namespace
}  // namespace lathe::serve
