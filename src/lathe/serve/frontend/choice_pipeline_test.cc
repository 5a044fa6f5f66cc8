// ChoicePipeline on hand-made engine outputs with the real Qwen3 tokenizer (skipped without it): whole
// UTF-8 characters only, a stop string across token boundaries cut and held back text released at the
// end, the EOS token's text, outputs after the finish ignored, and echo.
#include "lathe/serve/frontend/choice_pipeline.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lathe/io/test_paths.h"

namespace lathe::serve {
namespace {

std::optional<tokenizer::Tokenizer> qwen3_tokenizer() {
  const std::string dir = testing::tokenizers_root() + "/qwen3";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) return std::nullopt;
  return tokenizer::Tokenizer::load(dir);
}

#define LATHE_NEED_TOKENIZER(tok) \
  if (!tok) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root()

EngineOutput token_output(uint32_t id, std::optional<FinishReason> finish = std::nullopt) {
  return {.token = static_cast<int32_t>(id), .finish = finish};
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Feeds every id, the last one finishing with `finish`; every delta.
std::vector<ChoiceDelta> feed_deltas(ChoicePipeline& p, const std::vector<uint32_t>& ids, FinishReason finish) {
  std::vector<ChoiceDelta> deltas;
  for (size_t i = 0; i < ids.size(); ++i) {
    EngineOutput o = token_output(ids[i]);
    if (i + 1 == ids.size()) o.finish = finish;
    if (std::optional<ChoiceDelta> d = p.on_engine_output(o)) deltas.push_back(std::move(*d));
  }
  return deltas;
}

// The deltas' texts.
std::vector<std::string> feed(ChoicePipeline& p, const std::vector<uint32_t>& ids, FinishReason finish) {
  std::vector<std::string> texts;
  for (const ChoiceDelta& d : feed_deltas(p, ids, finish)) texts.push_back(d.text);
  return texts;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x;
  return s;
}

TEST(ChoicePipeline, EmitsWholeCharactersOnly) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  // Rare characters: byte-level BPE spells some of them with several tokens.
  const std::string text = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ 🦀🦀 done";
  const std::vector<uint32_t> ids = tok->encode_ids(text, false);
  ASSERT_GT(ids.size(), 8u);
  ChoicePipeline p(*tok, {});
  const std::vector<std::string> texts = feed(p, ids, FinishReason::kLength);
  for (const std::string& t : texts) EXPECT_TRUE(valid_utf8(t)) << "a delta with half a character";
  EXPECT_EQ(joined(texts), text);
  EXPECT_EQ(p.n_tokens(), static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(p.finished());
}

TEST(ChoicePipeline, StopStringAcrossTokensIsCutAndLaterOutputsIgnored) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const std::vector<uint32_t> ids = tok->encode_ids("hello world and more words", false);
  ASSERT_GE(ids.size(), 4u);
  ChoicePipeline p(*tok, {.stop = {"o w"}});
  std::string text;
  std::optional<std::string> finish;
  for (uint32_t id : ids) {
    if (std::optional<ChoiceDelta> d = p.on_engine_output(token_output(id))) {
      text += d->text;
      if (d->finish_reason) finish = d->finish_reason;
    }
  }
  EXPECT_EQ(text, "hell");
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(p.stopped_by_string());
  EXPECT_EQ(p.n_tokens(), 2);  // "hello", " world": the stop string was complete after the second token
  EXPECT_FALSE(p.on_engine_output(token_output(ids[0], FinishReason::kLength)));
}

TEST(ChoicePipeline, HeldBackTextIsReleasedWhenTheEngineFinishes) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const std::vector<uint32_t> ids = tok->encode_ids("hello world", false);
  ChoicePipeline p(*tok, {.stop = {"world peace"}});
  const std::vector<std::string> texts = feed(p, ids, FinishReason::kLength);
  EXPECT_EQ(joined(texts), "hello world");
  EXPECT_FALSE(p.stopped_by_string());
}

TEST(ChoicePipeline, TheEosTokenAddsNoTextUnlessAskedFor) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const uint32_t im_end = *tok->token_to_id("<|im_end|>");
  const uint32_t hi = tok->encode_ids("Hi", false).at(0);
  EngineOutput eos{.token = static_cast<int32_t>(im_end), .finish = FinishReason::kStop,
                   .stop_token = static_cast<int32_t>(im_end)};
  for (const bool skip_special : {true, false}) {
    ChoicePipeline p(*tok, {.skip_special_tokens = skip_special});
    EXPECT_EQ(p.on_engine_output(token_output(hi))->text, "Hi");
    const std::optional<ChoiceDelta> last = p.on_engine_output(eos);
    ASSERT_TRUE(last);
    EXPECT_EQ(last->text, "");
    EXPECT_EQ(last->finish_reason, "stop");
    EXPECT_EQ(p.n_tokens(), 2);
  }
  ChoicePipeline kept(*tok, {.include_stop_str_in_output = true, .skip_special_tokens = false});
  EXPECT_EQ(kept.on_engine_output(eos)->text, "<|im_end|>");
}

TEST(ChoicePipeline, EchoComesWithTheFirstDelta) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const std::vector<uint32_t> ids = tok->encode_ids(" there", false);
  ChoicePipeline p(*tok, {}, "Hello");
  const std::vector<std::string> texts = feed(p, ids, FinishReason::kLength);
  ASSERT_FALSE(texts.empty());
  EXPECT_EQ(texts.front().rfind("Hello", 0), 0u);
  EXPECT_EQ(joined(texts), "Hello there");
}

TEST(ChoicePipeline, AbortFinishesWithoutText) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  ChoicePipeline p(*tok, {.stop = {"hello world"}});
  EXPECT_FALSE(p.on_engine_output(token_output(tok->encode_ids("hello", false).at(0))));  // held back
  const std::optional<ChoiceDelta> d = p.on_engine_output({.finish = FinishReason::kAbort});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->finish_reason, "abort");
  EXPECT_EQ(d->text, "");
  EXPECT_EQ(p.n_tokens(), 1);
}



TEST(ChoicePipeline, ToolCallParserTurnsTheModelsCallIntoToolCalls) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  ChoicePipeline p(*tok, {.tool_calls = ToolCallFormat::kHermes});
  const std::vector<ChoiceDelta> deltas = feed_deltas(p, tok->encode_ids(text, false), FinishReason::kStop);
  std::string content, arguments;
  std::vector<ToolCallDelta> firsts;  // the deltas that open a call (they carry its name)
  for (const ChoiceDelta& d : deltas) {
    content += d.text;
    for (const ToolCallDelta& c : d.tool_calls) {
      if (!c.name.empty()) firsts.push_back(c);
      arguments += c.arguments;
    }
  }
  EXPECT_EQ(content, "Let me check.");
  ASSERT_EQ(firsts.size(), 1u);
  EXPECT_EQ(firsts[0].name, "get_weather");
  EXPECT_EQ(firsts[0].index, 0);
  EXPECT_EQ(firsts[0].id.rfind("call_", 0), 0u) << firsts[0].id;
  EXPECT_EQ(nlohmann::json::parse(arguments), nlohmann::json::parse(R"({"city": "Paris"})"));
  ASSERT_FALSE(deltas.empty());
  EXPECT_EQ(deltas.back().finish_reason, "tool_calls");  // the model stopped by itself after calling
}

TEST(ChoicePipeline, ParallelToolCallsFalseKeepsTheFirstCall) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  const std::vector<uint32_t> ids = tok->encode_ids(call + "\n" + call, false);
  for (const bool single : {false, true}) {
    ChoicePipeline p(*tok, {.tool_calls = ToolCallFormat::kHermes, .single_tool_call = single});
    int n_calls = 0;
    for (const ChoiceDelta& d : feed_deltas(p, ids, FinishReason::kStop))
      for (const ToolCallDelta& c : d.tool_calls) n_calls += !c.name.empty();
    EXPECT_EQ(n_calls, single ? 1 : 2) << "single_tool_call " << single;
  }
}

TEST(ChoicePipeline, ACallCutByTheLengthLimitStaysContentAndLength) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"argu";
  ChoicePipeline p(*tok, {.tool_calls = ToolCallFormat::kHermes});
  const std::vector<ChoiceDelta> deltas = feed_deltas(p, tok->encode_ids(text, false), FinishReason::kLength);
  std::string content;
  for (const ChoiceDelta& d : deltas) {
    content += d.text;
    EXPECT_TRUE(d.tool_calls.empty());
  }
  EXPECT_EQ(content, text);
  EXPECT_EQ(deltas.back().finish_reason, "length");
}

TEST(ChoicePipeline, ReasoningParserSplitsThinkingFromTheAnswer) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  for (const bool opened_by_prompt : {false, true}) {
    const std::string text = std::string(opened_by_prompt ? "" : "<think>\n") + "Red is warm.\n</think>\n\nRed.";
    ChoicePipeline p(*tok, {.reasoning = ReasoningFormat::kQwen3, .starts_in_reasoning = opened_by_prompt});
    std::string reasoning, content;
    for (const ChoiceDelta& d : feed_deltas(p, tok->encode_ids(text, false), FinishReason::kStop)) {
      reasoning += d.reasoning;
      content += d.text;
    }
    EXPECT_EQ(reasoning, "Red is warm.") << "opened by the prompt: " << opened_by_prompt;
    EXPECT_EQ(content, "Red.") << "opened by the prompt: " << opened_by_prompt;
  }
}


TEST(ChoicePipeline, DeltaPerTokenSendsTokensThatAddNoText) {
  const auto tok = qwen3_tokenizer();
  LATHE_NEED_TOKENIZER(tok);
  // Rare characters: byte-level BPE spells some with several tokens, whose first ones add no text yet.
  const std::string chars = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ";
  std::vector<uint32_t> ids = tok->encode_ids(chars, false);
  for (const bool per_token : {false, true}) {
    ChoicePipeline p(*tok, {.delta_per_token = per_token});
    size_t n_deltas = 0;
    std::string text;
    for (size_t i = 0; i < ids.size(); ++i)
      if (std::optional<ChoiceDelta> d = p.on_engine_output(token_output(ids[i]))) {
        ++n_deltas;
        text += d->text;
      }
    EXPECT_EQ(text, chars);
    if (per_token) EXPECT_EQ(n_deltas, ids.size());
    else EXPECT_LT(n_deltas, ids.size());
  }
}

}  // namespace
}  // namespace lathe::serve
