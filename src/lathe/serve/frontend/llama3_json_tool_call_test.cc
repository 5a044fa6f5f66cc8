// Llama 3.1+ JSON tool calls ([<|python_tag|>]{"name": ..., "parameters": {...}}[; ...]): a message
// that is calls, a message that is content (including JSON answers), malformed and unfinished calls;
// every text also fed byte by byte and at random splits.
#include <gtest/gtest.h>

#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

using parser_test::parse_tools_all_ways;
using parser_test::ToolParse;

constexpr ToolCallFormat kFormat = ToolCallFormat::kLlama3Json;

TEST(Llama3JsonToolCalls, PlainContentPassesThrough) {
  for (const std::string text : {"The capital of France is Paris.\n", "  leading spaces stay", "<b>bold</b> {x}", "\n\n"}) {
    SCOPED_TRACE(text);
    ToolParse r = parse_tools_all_ways(kFormat, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(Llama3JsonToolCalls, OneCallWithParameters) {
  ToolParse r = parse_tools_all_ways(kFormat, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].id, "call_0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris"})");
}

TEST(Llama3JsonToolCalls, PythonTagAndTwoCallsSeparatedBySemicolon) {
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "\n<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; "
                                     "{\"name\": \"b\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"x":[1,{"y":"}"}]})");
}

TEST(Llama3JsonToolCalls, AwkwardArgumentsSerialiseCompactly) {
  ToolParse r = parse_tools_all_ways(
      kFormat,
      "{\"name\": \"run\", \"parameters\": {\"s\": \"say \\\"hi\\\" {} ; [\", \"u\": \"\xE4\xB8\x96\xE7\x95\x8C\", "
      "\"n\": {\"deep\": {\"er\": [true, false, null, -0.5]}}}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            "{\"s\":\"say \\\"hi\\\" {} ; [\",\"u\":\"\xE4\xB8\x96\xE7\x95\x8C\",\"n\":{\"deep\":{\"er\":[true,false,null,-0.5]}}}");
}

TEST(Llama3JsonToolCalls, JsonAnswersAreContent) {
  for (const std::string text : {
           "{\"answer\": 42, \"note\": \"not a call\"}",
           "{\"name\": \"Bob\", \"age\": 30}",            // "name" but no parameters: a JSON answer
           "[1, 2, 3]",
           "{}",
       }) {
    SCOPED_TRACE(text);
    ToolParse r = parse_tools_all_ways(kFormat, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(Llama3JsonToolCalls, AJsonAnswerStreamsOnceItsFirstKeyRulesOutACall) {
  ToolCallParser parser(kFormat, parser_test::counting_ids());
  EXPECT_EQ(parser.feed("{\"answ").content, "");  // may still be "arguments"
  EXPECT_EQ(parser.feed("er\": 4").content, "{\"answer\": 4");
  EXPECT_EQ(parser.feed("2}").content, "2}");
  EXPECT_EQ(parser.finish().content, "");
}

TEST(Llama3JsonToolCalls, MalformedAndUnfinishedCallsAreContent) {
  for (const std::string text : {
           "{\"name\": \"f\", \"parameters\": {\"a\": 1}",  // unbalanced: the output ended
           "{\"name\": \"f\", \"parameters\": {\"a\": }}",  // balanced, not JSON
           "{\"name\": \"f\", \"parameters\": [1]}",
           "<|python_tag|>brave_search.call(query=\"x\")",  // a built-in tool's Python: not JSON
           "{\"name\": \"f\", \"parameters\": {]}",
       }) {
    SCOPED_TRACE(text);
    ToolParse r = parse_tools_all_ways(kFormat, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(Llama3JsonToolCalls, TextAfterTheCallsIsContent) {
  ToolParse r = parse_tools_all_ways(kFormat, "{\"name\": \"f\", \"parameters\": {}}\n\nDone; {\"name\": \"g\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "Done; {\"name\": \"g\"}");
  r = parse_tools_all_ways(kFormat, "{\"name\": \"f\", \"parameters\": {}}; not a call");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.content, "not a call");
}

TEST(Llama3JsonToolCalls, ContentFirstMeansNoCalls) {
  const std::string text = "Here you go: {\"name\": \"f\", \"parameters\": {}}";
  ToolParse r = parse_tools_all_ways(kFormat, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(Llama3JsonToolCalls, HeldBackPrefixThatIsNotAMarkerIsReleased) {
  ToolCallParser parser(kFormat, parser_test::counting_ids());
  EXPECT_EQ(parser.feed("<|python").content, "");
  EXPECT_EQ(parser.feed("ic|> is a snake").content, "<|pythonic|> is a snake");
  EXPECT_EQ(parser.finish().content, "");
  EXPECT_EQ(parser.n_calls(), 0);
}

}  // namespace
}  // namespace lathe::serve
