// Reasoning parsers: Qwen3's <think>...</think> (also when the prompt opened the block) and Gemma 4's
// <|channel>thought...<channel|>; names, detection and prompt_opens_reasoning; every text also fed
// byte by byte and at random splits, and chained into a tool-call parser.
#include "lathe/serve/frontend/reasoning_parser.h"

#include <gtest/gtest.h>

#include "lathe/serve/frontend/parser_test_util.h"

namespace lathe::serve {
namespace {

using parser_test::parse_reasoning_all_ways;

TEST(ReasoningParser, Qwen3BlockThenAnswer) {
  ReasoningDelta r = parse_reasoning_all_ways(ReasoningFormat::kQwen3,
                                              "<think>\nLet me think.\n\nTwo steps.\n</think>\n\nThe answer is 4.\n");
  EXPECT_EQ(r.reasoning, "Let me think.\n\nTwo steps.");
  EXPECT_EQ(r.content, "The answer is 4.\n");
}

TEST(ReasoningParser, Qwen3OutputStartingInsideTheBlock) {
  ReasoningDelta r = parse_reasoning_all_ways(ReasoningFormat::kQwen3, "Hmm, 2+2.\n</think>\n\nFour.", true);
  EXPECT_EQ(r.reasoning, "Hmm, 2+2.");
  EXPECT_EQ(r.content, "Four.");
}

TEST(ReasoningParser, Qwen3EmptyBlockAndNoBlock) {
  ReasoningDelta r = parse_reasoning_all_ways(ReasoningFormat::kQwen3, "<think>\n\n</think>\n\nJust this.");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Just this.");
  r = parse_reasoning_all_ways(ReasoningFormat::kQwen3, "  Just an answer, no <think> block.");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "  Just an answer, no <think> block.");  // a marker after content is content
}

TEST(ReasoningParser, UnclosedBlockRunsToTheEnd) {
  ReasoningDelta r = parse_reasoning_all_ways(ReasoningFormat::kQwen3, "<think>\nstill thinking </thi");
  EXPECT_EQ(r.reasoning, "still thinking </thi");
  EXPECT_EQ(r.content, "");
}

TEST(ReasoningParser, HeldBackPrefixThatIsNotAMarkerIsReleased) {
  ReasoningParser p(ReasoningFormat::kQwen3);
  ReasoningDelta d = p.feed("<thin");
  EXPECT_EQ(d.content + d.reasoning, "");
  d = p.feed("king about it>");
  EXPECT_EQ(d.content, "<thinking about it>");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_FALSE(p.in_reasoning());
}

TEST(ReasoningParser, InReasoningFollowsTheBlock) {
  ReasoningParser p(ReasoningFormat::kQwen3);
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.feed("<think>\nabc").reasoning, "abc");
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_EQ(p.feed("\n</thi").reasoning, "");  // "\n</thi" may be the end of the block
  EXPECT_TRUE(p.in_reasoning());
  ReasoningDelta d = p.feed("nk>\n\nok");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "ok");
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.finish().content, "");
}

TEST(ReasoningParser, Gemma4ChannelThenAnswer) {
  ReasoningDelta r =
      parse_reasoning_all_ways(ReasoningFormat::kGemma4, "<|channel>thought\nPlan: call the tool.<channel|>Final \xC3\xA9.");
  EXPECT_EQ(r.reasoning, "Plan: call the tool.");
  EXPECT_EQ(r.content, "Final \xC3\xA9.");
}

TEST(ReasoningParser, NoneIsAllContent) {
  ReasoningDelta r = parse_reasoning_all_ways(ReasoningFormat::kNone, "<think>x</think>y");
  EXPECT_EQ(r.content, "<think>x</think>y");
  EXPECT_EQ(r.reasoning, "");
}

TEST(ReasoningParser, ChainedIntoTheToolCallParser) {
  const std::string text =
      "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  for (uint64_t seed = 0; seed < 20; ++seed) {
    ReasoningParser reasoning(ReasoningFormat::kQwen3);
    ToolCallParser tools(ToolCallFormat::kHermes, parser_test::counting_ids());
    std::string thought, content;
    std::vector<ToolCallDelta> calls;
    auto take = [&](const ReasoningDelta& d, bool last) {
      thought += d.reasoning;
      ParsedDelta p = tools.feed(d.content);
      content += p.content;
      calls.insert(calls.end(), p.tool_calls.begin(), p.tool_calls.end());
      if (last) {
        p = tools.finish();
        content += p.content;
        calls.insert(calls.end(), p.tool_calls.begin(), p.tool_calls.end());
      }
    };
    for (std::string_view piece : parser_test::random_split(text, seed)) take(reasoning.feed(piece), false);
    take(reasoning.finish(), true);
    EXPECT_EQ(thought, "The user wants weather.");
    EXPECT_EQ(content, "");
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].name, "get_weather");
    EXPECT_EQ(calls[0].arguments, R"({"city":"Paris"})");
  }
}

TEST(ReasoningParser, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kGemma4, "<|turn>model\n<|channel>thought\n<channel|>"));
  EXPECT_TRUE(prompt_opens_reasoning(ReasoningFormat::kGemma4, "<|turn>model\n<|channel>thought\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kQwen3, "user: what is <think>?\n<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kNone, "<think>\n"));
}

TEST(ReasoningParser, NamesRoundTrip) {
  for (int i = 0; i < static_cast<int>(ReasoningFormat::kCount); ++i) {
    auto f = static_cast<ReasoningFormat>(i);
    EXPECT_EQ(reasoning_format_from_string(to_string(f)), f);
  }
  EXPECT_EQ(reasoning_format_from_string("deepseek_r1"), ReasoningFormat::kQwen3);
  EXPECT_FALSE(reasoning_format_from_string("auto").has_value());
}

TEST(ReasoningParser, DetectFromTemplateOrModelType) {
  EXPECT_EQ(detect_reasoning_format("qwen3", "{{ '<think>\\n' }}"), ReasoningFormat::kQwen3);
  EXPECT_EQ(detect_reasoning_format("", "x <|channel>thought y"), ReasoningFormat::kGemma4);
  EXPECT_EQ(detect_reasoning_format("qwen3", "{{ messages }}"), ReasoningFormat::kNone);
  EXPECT_EQ(detect_reasoning_format("qwen3_moe", ""), ReasoningFormat::kQwen3);
  EXPECT_EQ(detect_reasoning_format("gemma4_text", ""), ReasoningFormat::kGemma4);
  EXPECT_EQ(detect_reasoning_format("llama", ""), ReasoningFormat::kNone);
}

}  // namespace
}  // namespace lathe::serve
