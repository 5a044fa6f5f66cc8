// ChoicePipeline on hand-made engine outputs with the real Qwen3 tokenizer (skipped without it): whole
// UTF-8 characters only, a stop string across token boundaries cut and held back text released at the
// end, the EOS token's text, outputs after the finish ignored, and echo.
#include "lathe/serve/frontend/choice_pipeline.h"

#include <gtest/gtest.h>

#include <filesystem>

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

// Feeds every id, the last one finishing with `finish`; the deltas' texts.
std::vector<std::string> feed(ChoicePipeline& p, const std::vector<uint32_t>& ids, FinishReason finish) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::optional<FinishReason> f = i + 1 == ids.size() ? std::optional(finish) : std::nullopt;
    if (std::optional<ChoiceDelta> d = p.on_engine_output(token_output(ids[i], f))) texts.push_back(d->text);
  }
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

}  // namespace
}  // namespace lathe::serve
