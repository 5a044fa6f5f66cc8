// ToolCallParser independent of the format: names, detection from template text and model_type, ids,
// kNone, misuse; and the shared text helpers (marker prefixes, UTF-8 tails, JSON extents).
#include "lathe/serve/frontend/tool_call_parser.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"
#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

TEST(ToolCallFormat, NamesRoundTrip) {
  for (int i = 0; i < static_cast<int>(ToolCallFormat::kCount); ++i) {
    auto f = static_cast<ToolCallFormat>(i);
    EXPECT_EQ(tool_call_format_from_string(to_string(f)), f);
  }
  EXPECT_EQ(to_string(ToolCallFormat::kLlama3Json), "llama3_json");
  EXPECT_EQ(tool_call_format_from_string("qwen3"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_from_string("llama3"), ToolCallFormat::kLlama3Json);
  EXPECT_FALSE(tool_call_format_from_string("auto").has_value());
  EXPECT_FALSE(tool_call_format_from_string("").has_value());
}

TEST(ToolCallFormat, DetectFromTemplateTextFirst) {
  EXPECT_EQ(detect_tool_call_format("qwen3", "... <tool_call>\\n{...}\\n</tool_call> ..."), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format("gemma4_text", "{{- '<|tool_call>call:' + name -}}"), ToolCallFormat::kGemma4);
  EXPECT_EQ(detect_tool_call_format("llama", "{{- '[TOOL_CALLS][' -}}"), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format("llama", "{{- '<|python_tag|>' + tool_call }}"), ToolCallFormat::kLlama3Json);
  // A template that never mentions a call syntax: the model was not taught one, whatever its family.
  EXPECT_EQ(detect_tool_call_format("qwen3", "{{ messages }}"), ToolCallFormat::kNone);
}

TEST(ToolCallFormat, DetectFromModelTypeWhenThereIsNoTemplate) {
  EXPECT_EQ(detect_tool_call_format("qwen2", ""), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format("qwen3_moe", ""), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format("mistral", ""), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format("gemma4_text", ""), ToolCallFormat::kGemma4);
  EXPECT_EQ(detect_tool_call_format("llama", ""), ToolCallFormat::kNone);  // Llama 2 or 3.x: unknowable
  EXPECT_EQ(detect_tool_call_format("gemma3_text", ""), ToolCallFormat::kNone);
}

TEST(ToolCallParser, RandomIdsHaveOpenAIsShape) {
  std::string a = random_call_id(), b = random_call_id();
  EXPECT_EQ(a.size(), 5u + 24u);
  EXPECT_EQ(a.rfind("call_", 0), 0u);
  EXPECT_NE(a, b);
  ToolCallParser parser(ToolCallFormat::kHermes, nullptr);  // null: random ids
  ParsedDelta d = parser.feed("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCallParser, NoneIsAllContent) {
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> [TOOL_CALLS] \n";
  parser_test::ToolParse r = parser_test::parse_tools_all_ways(ToolCallFormat::kNone, text);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCallParser, EmptyOutputAndEmptyFeeds) {
  for (int i = 0; i < static_cast<int>(ToolCallFormat::kCount); ++i) {
    ToolCallParser parser(static_cast<ToolCallFormat>(i), parser_test::counting_ids());
    EXPECT_EQ(parser.feed("").content, "");
    ParsedDelta d = parser.finish();
    EXPECT_EQ(d.content, "");
    EXPECT_TRUE(d.tool_calls.empty());
    EXPECT_EQ(parser.n_calls(), 0);
  }
}

TEST(ToolCallParser, MisuseThrows) {
  ToolCallParser parser(ToolCallFormat::kHermes, parser_test::counting_ids());
  parser.finish();
  EXPECT_THROW(parser.feed("x"), InvalidArgument);
  EXPECT_THROW(parser.finish(), InvalidArgument);
  EXPECT_THROW(ToolCallParser(ToolCallFormat::kCount, nullptr), InvalidArgument);
}

TEST(MarkerScan, PartialMarkerSuffix) {
  EXPECT_EQ(detail::partial_marker_suffix("abc <tool", "<tool_call>"), 5u);
  EXPECT_EQ(detail::partial_marker_suffix("abc <", "<tool_call>"), 1u);
  EXPECT_EQ(detail::partial_marker_suffix("abc <tool_call>", "<tool_call>"), 0u);  // whole: not partial
  EXPECT_EQ(detail::partial_marker_suffix("abc", "<tool_call>"), 0u);
  EXPECT_EQ(detail::partial_marker_suffix("", "<tool_call>"), 0u);
}

TEST(MarkerScan, IncompleteUtf8Suffix) {
  EXPECT_EQ(detail::incomplete_utf8_suffix("abc"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_suffix("a\xC3"), 1u);
  EXPECT_EQ(detail::incomplete_utf8_suffix("a\xC3\xA9"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_suffix("\xE4\xB8"), 2u);
  EXPECT_EQ(detail::incomplete_utf8_suffix("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(detail::incomplete_utf8_suffix("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(detail::incomplete_utf8_suffix(""), 0u);
}

TEST(MarkerScan, JsonExtent) {
  using Status = detail::JsonExtent::Status;
  detail::JsonExtent e = detail::json_extent(R"({"a": "}\"]", "b": [1, {}]} tail)");
  EXPECT_EQ(e.status, Status::kComplete);
  EXPECT_EQ(e.end, std::string_view(R"({"a": "}\"]", "b": [1, {}]})").size());
  EXPECT_EQ(detail::json_extent(R"({"a": [1, 2)").status, Status::kIncomplete);
  EXPECT_EQ(detail::json_extent(R"({"a": "\)").status, Status::kIncomplete);
  EXPECT_EQ(detail::json_extent(R"({"a": ]})").status, Status::kMalformed);
  EXPECT_EQ(detail::json_extent(std::string(detail::kMaxArgumentDepth + 1, '[')).status, Status::kMalformed);
}

TEST(MarkerScan, CutBeforeMarkerHoldsWhitespaceAndPrefixes) {
  detail::MarkerCut c = detail::cut_before_marker("text \n<tool_call>x", "<tool_call>", false);
  EXPECT_EQ(c.text, 4u);
  EXPECT_EQ(c.space, 2u);
  EXPECT_TRUE(c.marker);
  c = detail::cut_before_marker("text \n<tool", "<tool_call>", false);
  EXPECT_EQ(c.text, 4u);
  EXPECT_FALSE(c.marker);
  c = detail::cut_before_marker("text \n<tool", "<tool_call>", true);
  EXPECT_EQ(c.text, 11u);
}

}  // namespace
}  // namespace lathe::serve
