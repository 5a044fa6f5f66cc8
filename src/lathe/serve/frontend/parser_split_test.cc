// Property test: texts assembled at random from marker pieces, JSON punctuation, whitespace and
// multi-byte characters must parse the same whole, byte by byte and at random splits, in every
// tool-call and reasoning format, and never trip an assertion; a text without calls is all content.
#include <gtest/gtest.h>

#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

constexpr std::string_view kPieces[] = {
    "<tool_call>", "</tool_call>", "<tool", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[TOOL", "<|python_tag|>",
    "<|tool_call>", "<tool_call|>", "<|\"|>", "call:", "<think>", "</think>", "<|channel>thought",
    "<channel|>", "{", "}", "[", "]", "\"", ":", ",", ";", "\\", " ", "\n", "  \n", "name", "\"name\": \"f\"",
    "\"arguments\": ", "\"parameters\": ", "{\"a\": [1, \"}\"]}", "f", "x", "1.5", "true", "\xC3\xA9",
    "\xE4\xB8\x96", "\xF0\x9F\x98\x80", "text ", "{\"name\": \"g\", \"arguments\": {}}",
    // whole calls, so that calls and text mix
    "<tool_call>{\"name\": \"g\", \"arguments\": {\"k\": \"v\"}}</tool_call>", "[TOOL_CALLS]f[ARGS]{\"a\": 1}",
    "[TOOL_CALLS][{\"name\": \"h\", \"arguments\": {}}]", "<|tool_call>call:f{a:<|\"|>b<|\"|>}<tool_call|>"};

std::string random_text(std::mt19937_64& gen) {
  std::uniform_int_distribution<size_t> n_pieces(0, 24);
  std::uniform_int_distribution<size_t> pick(0, std::size(kPieces) - 1);
  std::string text;
  for (size_t n = n_pieces(gen); n > 0; --n) text += kPieces[pick(gen)];
  return text;
}

TEST(ParserSplits, RandomTextsAgreeInEveryToolCallFormat) {
  std::mt19937_64 gen(1234);
  int n_with_calls = 0;
  for (int i = 0; i < 300; ++i) {
    std::string text = random_text(gen);
    for (int f = 0; f < static_cast<int>(ToolCallFormat::kCount); ++f) {
      SCOPED_TRACE(std::string(to_string(static_cast<ToolCallFormat>(f))) + ": " + text);
      parser_test::ToolParse r = parser_test::parse_tools_all_ways(static_cast<ToolCallFormat>(f), text);
      if (::testing::Test::HasFailure()) return;  // one failing text is enough to debug
      n_with_calls += !r.calls.empty();
      if (r.calls.empty()) {
        EXPECT_EQ(r.content, text);  // without calls nothing is dropped: the text is content as written
      }
    }
  }
  EXPECT_GT(n_with_calls, 200);  // of 1500 parses (253 with this seed): the texts do exercise calls
}

TEST(ParserSplits, RandomTextsAgreeInEveryReasoningFormat) {
  std::mt19937_64 gen(5678);
  for (int i = 0; i < 300; ++i) {
    std::string text = random_text(gen);
    for (int f = 0; f < static_cast<int>(ReasoningFormat::kCount); ++f) {
      for (bool starts_in_reasoning : {false, true}) {
        SCOPED_TRACE(std::string(to_string(static_cast<ReasoningFormat>(f))) + ": " + text);
        parser_test::parse_reasoning_all_ways(static_cast<ReasoningFormat>(f), text, starts_in_reasoning);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace lathe::serve
