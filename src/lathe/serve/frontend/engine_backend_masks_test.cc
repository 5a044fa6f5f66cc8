// allowed_token_ids and bad_words through EngineBackend on a real Engine (the random Qwen3 text model
// with the real Qwen3 tokenizer): only allowed tokens are sampled, bad words are tokenised as vLLM does
// (with and without a leading space), a banned word's last token is masked right after its other
// tokens and nowhere else, and ids outside the vocabulary or words without tokens are 400s naming the
// field.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "lathe/infer/generate.h"
#include "lathe/serve/frontend/engine_backend.h"
#include "lathe/serve/frontend/engine_requests.h"
#include "lathe/serve/frontend/frontend_test_util.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

using testing::BackendFixture;
using testing::BackendResult;

std::optional<ApiError> refusal(BackendFixture& f, const nlohmann::json& body) {
  try {
    f.run(body);
  } catch (const ApiException& e) {
    return e.error();
  }
  return std::nullopt;
}

// The text a logprobs entry reports for token `id` (special tokens spelled out).
std::string token_text(const BackendFixture& f, int32_t id) {
  return f.tok->decode(std::vector<uint32_t>{static_cast<uint32_t>(id)}, /*skip_special_tokens=*/false);
}

TEST(EngineBackendMasks, OnlyAllowedTokensAreSampled) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  std::vector<int32_t> allowed;
  std::set<std::string> texts;
  for (const char* word : {" red", " green", " blue", " sky"}) {
    const std::vector<int32_t> ids = f.encode(word, /*add_special_tokens=*/false);
    ASSERT_EQ(ids.size(), 1u) << word;
    allowed.push_back(ids[0]);
    texts.insert(word);
  }
  nlohmann::json body = {{"prompt", "Colours:"}, {"temperature", 1.0}, {"seed", 5}, {"max_tokens", 24},
                         {"ignore_eos", true}, {"logprobs", 0}, {"n", 3}};
  const BackendResult unmasked = f.run(body);
  ASSERT_FALSE(unmasked.error) << unmasked.error->message;
  int outside = 0;  // the random model leaves the set almost every token when nothing holds it
  for (const TokenLogprob& t : unmasked.logprobs.at(0)) outside += !texts.count(t.token);
  EXPECT_GT(outside, 12);

  body["allowed_token_ids"] = allowed;
  const BackendResult r = f.run(body);
  ASSERT_FALSE(r.error) << r.error->message;
  for (int c = 0; c < 3; ++c) {
    ASSERT_EQ(r.logprobs.at(c).size(), 24u);
    for (const TokenLogprob& t : r.logprobs.at(c)) EXPECT_TRUE(texts.count(t.token)) << "choice " << c << ": " << t.token;
  }
}

TEST(EngineBackendMasks, BadIdsAndEmptyWordsAreRefusedNamingTheField) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  for (const nlohmann::json& ids : {nlohmann::json::array(), nlohmann::json{5, 151936}, nlohmann::json{-1}}) {
    const std::optional<ApiError> e = refusal(f, {{"prompt", "x"}, {"allowed_token_ids", ids}});
    ASSERT_TRUE(e) << ids;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, "allowed_token_ids") << e->message;
  }
  for (const std::string word : {"", "  ", "\n"}) {
    const std::optional<ApiError> e = refusal(f, {{"prompt", "x"}, {"bad_words", {"fine", word}}});
    ASSERT_TRUE(e) << "'" << word << "'";
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, "bad_words") << e->message;
  }
  EXPECT_EQ(f.backend->n_in_flight(), 0u);
}

TEST(EngineBackendMasks, BadWordsAreTokenisedWithAndWithoutALeadingSpace) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  auto enc = [&](const std::string& s) { return f.encode(s, /*add_special_tokens=*/false); };
  // "hello" starts a word in " hello" (Qwen3 marks it: one other token), so both forms are banned; a
  // leading space in the request's word is stripped first (vLLM's lstrip).
  const std::vector<std::vector<int32_t>> hello = {enc("hello"), enc(" hello")};
  ASSERT_NE(hello[0], hello[1]);
  ASSERT_EQ(hello[0].size(), hello[1].size());
  EXPECT_EQ(bad_words_token_ids(*f.tok, {"hello"}), hello);
  EXPECT_EQ(bad_words_token_ids(*f.tok, {"  hello"}), hello);
  // Multi-token words keep every token; the spaced form only when it has as many tokens.
  for (const std::string word : {"hello world", "antidisestablishment", "2024"}) {
    const std::vector<int32_t> bare = enc(word), spaced = enc(" " + word);
    std::vector<std::vector<int32_t>> want = {bare};
    if (spaced.front() != bare.front() && spaced.size() == bare.size()) want.push_back(spaced);
    EXPECT_EQ(bad_words_token_ids(*f.tok, {word}), want) << word;
  }
  // Qwen3 writes digits one token each, and " 2024" has a lone space token first: the bare form only.
  EXPECT_EQ(bad_words_token_ids(*f.tok, {"2024"}).size(), 1u);
  EXPECT_EQ(bad_words_token_ids(*f.tok, {"hello", "hello world"}).size(), 4u);
}

// The first position of `out` whose token ends one of `banned` (its earlier tokens right before it), or
// out.size(): where a run with the ban leaves the unbanned greedy run.
size_t first_banned(const std::vector<int32_t>& out, const std::vector<std::vector<int32_t>>& banned) {
  for (size_t j = 0; j < out.size(); ++j)
    for (const std::vector<int32_t>& w : banned)
      if (w.size() <= j + 1 && std::equal(w.begin(), w.end(), out.begin() + static_cast<long>(j + 1 - w.size())))
        return j;
  return out.size();
}

TEST(EngineBackendMasks, GreedyLeavesItsPathExactlyWhereABadWordWouldEnd) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const std::string prompt = "The quick brown fox";
  const std::vector<int32_t> ids = f.encode(prompt);
  constexpr int kTokens = 12;
  GenerateOptions o{.max_new_tokens = kTokens};  // greedy, no stop ids: the engine's greedy tokens
  const GenerateResult want = generate(*f.model, ids, o);
  const std::vector<int32_t> out(want.tokens.begin() + static_cast<long>(ids.size()), want.tokens.end());
  ASSERT_EQ(out.size(), static_cast<size_t>(kTokens));
  const nlohmann::json body = {{"prompt", prompt}, {"temperature", 0}, {"max_tokens", kTokens},
                               {"ignore_eos", true}, {"logprobs", 0}};

  // Every word of one and of two consecutive output tokens whose tokenisation gives those tokens back.
  int tried_one = 0, tried_two = 0;
  for (size_t i = 2; i + 1 < out.size(); ++i) {
    for (const size_t len : {size_t{1}, size_t{2}}) {
      const std::vector<int32_t> piece(out.begin() + static_cast<long>(i), out.begin() + static_cast<long>(i + len));
      const std::string word = f.tok->decode(std::vector<uint32_t>(piece.begin(), piece.end()), true);
      if (word.find_first_not_of(" \t\n") == std::string::npos) continue;
      const std::vector<std::vector<int32_t>> banned = bad_words_token_ids(*f.tok, {word});
      if (std::find(banned.begin(), banned.end(), piece) == banned.end()) continue;  // not a round trip
      (len == 1 ? tried_one : tried_two) += 1;
      const size_t j = first_banned(out, banned);
      ASSERT_LE(j, i + len - 1);
      nlohmann::json banned_body = body;
      banned_body["bad_words"] = {word};
      const BackendResult r = f.run(banned_body);
      ASSERT_FALSE(r.error) << r.error->message;
      const std::vector<TokenLogprob>& got = r.logprobs.at(0);
      ASSERT_EQ(got.size(), static_cast<size_t>(kTokens));
      // The same tokens up to j (a multi-token word's first tokens stay allowed elsewhere), another at j.
      for (size_t k = 0; k < j; ++k) EXPECT_EQ(got[k].token, token_text(f, out[k])) << "word '" << word << "' at " << k;
      EXPECT_NE(got[j].token, token_text(f, out[j])) << "word '" << word << "' at " << j;
    }
  }
  EXPECT_GE(tried_one, 3);
  EXPECT_GE(tried_two, 2);
}

}  // namespace
}  // namespace lathe::serve
