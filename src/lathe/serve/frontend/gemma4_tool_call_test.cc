// Gemma 4 tool calls (<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>, specs/gemma4.md §6):
// the notation converted to JSON arguments, several calls, malformed and unfinished calls, held-back
// marker prefixes; every text also fed byte by byte and at random splits.
#include <gtest/gtest.h>

#include "lathe/serve/frontend/parser_test_util.h"
#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/tool_call_scanner.h"

namespace lathe::serve {
namespace {

using parser_test::parse_tools_all_ways;
using parser_test::ToolParse;

constexpr ToolCallFormat kFormat = ToolCallFormat::kGemma4;

TEST(Gemma4ToolCalls, PlainContentPassesThrough) {
  const std::string text = "No calls: <|turn> is not a call, nor <tool_call>, {a:1}.\n";
  ToolParse r = parse_tools_all_ways(kFormat, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(Gemma4ToolCalls, ContentThenOneCall) {
  // The call as the chat template renders one (keys sorted by dictsort).
  ToolParse r = parse_tools_all_ways(kFormat,
                                     "Let me look.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:2,"
                                     "extra:{b:[1,<|\"|>x<|\"|>]},hourly:false,unit:<|\"|>C<|\"|>}<tool_call|>");
  EXPECT_EQ(r.content, "Let me look.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].id, "call_0");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Paris","days":2,"extra":{"b":[1,"x"]},"hourly":false,"unit":"C"})");
}

TEST(Gemma4ToolCalls, TwoCallsBackToBack) {
  ToolParse r = parse_tools_all_ways(
      kFormat, "<|tool_call>call:a{}<tool_call|><|tool_call>call:b{x:<|\"|>y<|\"|>}<tool_call|>");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "a");
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.calls[1].index, 1);
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"x":"y"})");
}

TEST(Gemma4ToolCalls, StringsKeepQuotesBracesAndUnicode) {
  // Inside <|"|> quotes everything is text: JSON quotes and backslashes get escaped in the arguments.
  ToolParse r = parse_tools_all_ways(
      kFormat,
      "<|tool_call>call:say{q:<|\"|>say \"hi\", {x}: [y] \\n \xE4\xB8\x96\xE7\x95\x8C<|\"|>,"
      "multi:<|\"|>line1\nline2<|\"|>}<tool_call|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            "{\"q\":\"say \\\"hi\\\", {x}: [y] \\\\n \xE4\xB8\x96\xE7\x95\x8C\",\"multi\":\"line1\\nline2\"}");
}

TEST(Gemma4ToolCalls, BareValuesNumbersBooleansNullAndWords) {
  ToolParse r = parse_tools_all_ways(
      kFormat,
      "<|tool_call>call:f{a:-1.5e3,b:0,c:2.50,d:true,e:False,f:None,g:null,h:Paris, i : [ 1 , 2 ] ,j:007,"
      "<|\"|>quoted key<|\"|>:1,}<tool_call|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments,
            R"({"a":-1500.0,"b":0,"c":2.5,"d":true,"e":false,"f":null,"g":null,"h":"Paris","i":[1,2],"j":"007","quoted key":1})");
}

TEST(Gemma4ToolCalls, MalformedAndUnfinishedCallsAreContent) {
  for (const std::string text : {
           "<|tool_call>call:f{a:<|\"|>unterminated}<tool_call|>",
           "<|tool_call>get_weather{}<tool_call|>",          // no "call:"
           "<|tool_call>call:{a:1}<tool_call|>",              // no name
           "<|tool_call>call:f{a:1<tool_call|>",              // the object never closes
           "<|tool_call>call:f{a:1}}<tool_call|>",
           "<|tool_call>call:f{a}<tool_call|>",               // a key without a value
           "<|tool_call>call:f{a:{b:[1,}}<tool_call|>",
           "Sure <|tool_call>call:f{a:<|\"|>still writing",
       }) {
    SCOPED_TRACE(text);
    ToolParse r = parse_tools_all_ways(kFormat, text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(Gemma4ToolCalls, HeldBackPrefixThatIsNotAMarkerIsReleased) {
  ToolCallParser parser(kFormat, parser_test::counting_ids());
  EXPECT_EQ(parser.feed("Hi <|tool").content, "Hi");
  EXPECT_EQ(parser.feed("> is not a call").content, " <|tool> is not a call");
  EXPECT_EQ(parser.finish().content, "");
  EXPECT_EQ(parser.n_calls(), 0);
}

TEST(Gemma4Notation, ReadsNestedValuesAndRejectsDeepNesting) {
  std::optional<nlohmann::ordered_json> j =
      detail::parse_gemma4_object(" {a:{b:{c:[[<|\"|>x<|\"|>],{}]}},d:[]} ");
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(j->dump(), R"({"a":{"b":{"c":[["x"],{}]}},"d":[]})");
  const size_t n = detail::kMaxArgumentDepth + 1;
  EXPECT_FALSE(detail::parse_gemma4_object("{a:" + std::string(n, '[') + std::string(n, ']') + "}").has_value());
  EXPECT_FALSE(detail::parse_gemma4_object("{a:1} trailing").has_value());
  EXPECT_FALSE(detail::parse_gemma4_object("[1]").has_value());
}

}  // namespace
}  // namespace lathe::serve
