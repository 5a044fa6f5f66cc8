// EngineBackend on a real Engine (no HTTP): the random Qwen3 text model with the real Qwen3 tokenizer.
// Completions: text equal to generate()'s, text and id prompts agreeing, prompt-major choice indices,
// stop strings cut across token boundaries, max_tokens and EOS finishes, seeded n > 1, logprobs, echo,
// usage, refusals before anything is queued, and an abort that frees the KV cache.
#include "lathe/serve/frontend/engine_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "lathe/infer/generate.h"
#include "lathe/serve/frontend/frontend_test_util.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

using testing::BackendFixture;
using testing::BackendResult;
using testing::EventCollector;

// The ApiError a request body is refused with (at parse or at submit), or nullopt when it is accepted.
std::optional<ApiError> refusal(BackendFixture& f, const nlohmann::json& body) {
  try {
    EventCollector c;
    f.backend->submit(f.request(body), c.callback());
    c.wait();
  } catch (const ApiException& e) {
    return e.error();
  }
  return std::nullopt;
}

TEST(EngineBackend, GreedyCompletionEqualsGenerate) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const std::vector<int32_t> ids = f.encode("The quick brown fox");
  GenerateOptions o{.max_new_tokens = 8};  // greedy, no stop ids
  const GenerateResult want = generate(*f.model, ids, o);
  const std::vector<uint32_t> new_ids(want.tokens.begin() + static_cast<long>(ids.size()), want.tokens.end());

  const BackendResult r =
      f.run({{"prompt", "The quick brown fox"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.text.at(0), f.tok->decode(new_ids, /*skip_special_tokens=*/true));
  EXPECT_EQ(r.finish.at(0), "length");
  EXPECT_EQ(r.usage.prompt_tokens, static_cast<int64_t>(ids.size()));
  EXPECT_EQ(r.usage.completion_tokens, 8);
  EXPECT_EQ(f.backend->n_in_flight(), 0u);
}

TEST(EngineBackend, TextAndIdPromptsAgreeAndChoicesArePromptMajor) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const std::string prompt = "Once upon a time";
  const std::vector<int32_t> ids = f.encode(prompt);
  // Two prompts (the same one as text and as ids), n = 2, seeded: choices 0, 1 belong to the first
  // prompt and 2, 3 to the second, and the same prompt with the same seed samples the same tokens.
  const BackendResult r = f.run({{"prompt", {prompt, ids}}, {"n", 2}, {"seed", 11}, {"temperature", 1.0},
                                 {"max_tokens", 6}, {"ignore_eos", true}});
  ASSERT_FALSE(r.error) << r.error->message;
  ASSERT_EQ(r.finish.size(), 4u);
  EXPECT_EQ(r.text.at(0), r.text.at(2));
  EXPECT_EQ(r.text.at(1), r.text.at(3));
  EXPECT_EQ(r.usage.prompt_tokens, 2 * static_cast<int64_t>(ids.size()));
  EXPECT_EQ(r.usage.completion_tokens, 4 * 6);
  // The id prompt alone gives the text prompt's first choice.
  const BackendResult alone = f.run({{"prompt", ids}, {"seed", 11}, {"temperature", 1.0}, {"max_tokens", 6},
                                     {"ignore_eos", true}});
  EXPECT_EQ(alone.text.at(0), r.text.at(0));
}

TEST(EngineBackend, SeededChoicesAreReproducible) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const nlohmann::json body = {{"prompt", "Hello"}, {"n", 2}, {"seed", 42}, {"temperature", 1.0},
                               {"max_tokens", 6}, {"ignore_eos", true}};
  const BackendResult a = f.run(body), b = f.run(body);
  ASSERT_EQ(a.text.size(), 2u);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.usage.completion_tokens, 12);
  // A second engine (fresh process state) agrees too.
  BackendFixture g(testing::qwen3_text_model_dir());
  EXPECT_EQ(g.run(body).text, a.text);
}

TEST(EngineBackend, StopStringAcrossTokensIsCut) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  nlohmann::json body = {{"prompt", "Hello"}, {"seed", 3}, {"temperature", 1.0}, {"max_tokens", 12}, {"ignore_eos", true}};
  const BackendResult full = f.run(body);
  const std::vector<std::string>& pieces = full.pieces.at(0);
  ASSERT_GE(pieces.size(), 4u) << full.text.at(0);
  // The stop string: the last character of one token's text and the first of the next one's.
  const size_t k = pieces.size() / 2;
  size_t last_char = pieces[k - 1].size() - 1;
  while (last_char > 0 && (static_cast<unsigned char>(pieces[k - 1][last_char]) & 0xC0) == 0x80) --last_char;
  size_t first_len = 1;
  while (first_len < pieces[k].size() && (static_cast<unsigned char>(pieces[k][first_len]) & 0xC0) == 0x80) ++first_len;
  const std::string stop = pieces[k - 1].substr(last_char) + pieces[k].substr(0, first_len);
  const std::string& text = full.text.at(0);
  const size_t at = text.find(stop);
  ASSERT_NE(at, std::string::npos);

  body["stop"] = stop;
  const BackendResult cut = f.run(body);
  EXPECT_EQ(cut.text.at(0), text.substr(0, at)) << "stop " << stop;
  EXPECT_EQ(cut.finish.at(0), "stop");
  EXPECT_LT(cut.usage.completion_tokens, 12);
  body["include_stop_str_in_output"] = true;
  const BackendResult kept = f.run(body);
  EXPECT_EQ(kept.text.at(0), text.substr(0, at + stop.size()));
  // The engine request was aborted once the stop string ended it: nothing stays in flight or holds KV.
  EXPECT_EQ(f.backend->n_in_flight(), 0u);
}

// The engine's metrics once its loop has published the turn that ended every request (the last output
// reaches the client before the loop publishes).
EngineMetrics settled_metrics(BackendFixture& f) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  EngineMetrics m = f.engine->metrics();
  while ((m.core.n_running != 0 || m.core.n_waiting != 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    m = f.engine->metrics();
  }
  return m;
}

// n = 2 where a stop string ends one choice early: that choice's sequence ends in the engine at once
// (finish_choice), so the engine generates exactly the tokens the client is billed for instead of
// decoding the stopped choice on until max_tokens beside its sibling; the stop counts as a stop.
TEST(EngineBackend, StopStringEndsItsChoiceInTheEngineWhileTheOtherRunsOn) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  constexpr int kMax = 40;
  nlohmann::json body = {{"prompt", "Hello"}, {"n", 2}, {"seed", 5}, {"temperature", 1.0}, {"max_tokens", kMax},
                         {"ignore_eos", true}};
  const BackendResult full = f.run(body);
  ASSERT_FALSE(full.error) << full.error->message;
  // A stop string early in one choice's text that never occurs in the other's.
  std::string stop;
  int stopped = -1;
  for (int c = 0; c < 2 && stopped < 0; ++c) {
    const std::vector<std::string>& pieces = full.pieces.at(c);
    for (size_t k = 1; k < std::min<size_t>(pieces.size(), 8); ++k) {
      if (full.text.at(1 - c).find(pieces[k]) != std::string::npos) continue;
      stop = pieces[k];
      stopped = c;
      break;
    }
  }
  ASSERT_GE(stopped, 0) << "no stop string found in " << full.text.at(0) << " / " << full.text.at(1);
  const int other = 1 - stopped;

  const EngineMetrics before = settled_metrics(f);
  body["stop"] = stop;
  const BackendResult r = f.run(body);
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.finish.at(stopped), "stop");
  EXPECT_EQ(r.finish.at(other), "length");
  EXPECT_EQ(r.text.at(other), full.text.at(other));
  EXPECT_LT(r.usage.completion_tokens, 2 * kMax);
  const EngineMetrics after = settled_metrics(f);
  EXPECT_EQ(after.generation_tokens - before.generation_tokens, r.usage.completion_tokens)
      << "the stopped choice went on decoding in the engine";
  auto finished = [](const EngineMetrics& m, FinishReason why) { return m.request_success[static_cast<size_t>(why)]; };
  EXPECT_EQ(finished(after, FinishReason::kStop) - finished(before, FinishReason::kStop), 1);
  EXPECT_EQ(finished(after, FinishReason::kLength) - finished(before, FinishReason::kLength), 1);
  EXPECT_EQ(finished(after, FinishReason::kAbort), finished(before, FinishReason::kAbort));
  EXPECT_EQ(after.core.kv_blocks_used, 0);
  EXPECT_EQ(f.backend->n_in_flight(), 0u);

  // n = 1: the stop string ends the only choice in the engine the same way.
  nlohmann::json one = body;
  one["n"] = 1;
  one["stop"] = stopped == 0 ? stop : std::string(full.pieces.at(0).at(1));
  const BackendResult single = f.run(one);
  EXPECT_EQ(single.finish.at(0), "stop");
  EXPECT_LT(single.usage.completion_tokens, kMax);
  const EngineMetrics last = settled_metrics(f);
  EXPECT_EQ(last.generation_tokens - after.generation_tokens, single.usage.completion_tokens);
  EXPECT_EQ(finished(last, FinishReason::kStop) - finished(after, FinishReason::kStop), 1);
}

TEST(EngineBackend, EosEndsWithStopAndAddsNoText) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  // A bias that makes <|im_end|> (the eos id) the first token.
  const nlohmann::json bias = {{std::to_string(testing::kQwen3ImEnd), 100}};
  const BackendResult r = f.run({{"prompt", "Hi"}, {"temperature", 0}, {"max_tokens", 5}, {"logit_bias", bias}});
  EXPECT_EQ(r.text.at(0), "");
  EXPECT_EQ(r.finish.at(0), "stop");
  EXPECT_EQ(r.usage.completion_tokens, 1);
  // include_stop_str_in_output with special tokens kept: its text is the output.
  const BackendResult kept = f.run({{"prompt", "Hi"}, {"temperature", 0}, {"max_tokens", 5}, {"logit_bias", bias},
                                    {"include_stop_str_in_output", true}, {"skip_special_tokens", false}});
  EXPECT_EQ(kept.text.at(0), "<|im_end|>");
}

TEST(EngineBackend, LogprobsAreFiniteAndSorted) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const BackendResult r = f.run({{"prompt", "The sky is"}, {"temperature", 0}, {"max_tokens", 5}, {"logprobs", 3},
                                 {"ignore_eos", true}});
  const std::vector<TokenLogprob>& lps = r.logprobs.at(0);
  ASSERT_EQ(lps.size(), 5u);
  std::string joined;
  for (const TokenLogprob& t : lps) {
    EXPECT_TRUE(std::isfinite(t.logprob) && t.logprob <= 0.f) << t.logprob;
    ASSERT_GE(t.top.size(), 3u);
    EXPECT_LE(t.top.size(), 4u);  // the top 3, and the sampled token after them when not among them
    for (size_t i = 1; i < t.top.size(); ++i) EXPECT_GE(t.top[i - 1].logprob, t.top[i].logprob);
    // Greedy: the sampled token is the most likely one.
    EXPECT_EQ(t.top[0].token, t.token);
    EXPECT_FLOAT_EQ(t.top[0].logprob, t.logprob);
    joined += t.token;
  }
  EXPECT_EQ(joined, r.text.at(0));  // whole characters here: each token's text is its piece of the output
}

TEST(EngineBackend, EchoPutsThePromptFirst) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const nlohmann::json body = {{"prompt", "Echo me"}, {"temperature", 0}, {"max_tokens", 3}, {"ignore_eos", true}};
  const BackendResult plain = f.run(body);
  nlohmann::json echoed = body;
  echoed["echo"] = true;
  const BackendResult r = f.run(echoed);
  EXPECT_EQ(r.text.at(0), "Echo me" + plain.text.at(0));
  EXPECT_EQ(r.pieces.at(0).front().rfind("Echo me", 0), 0u);
}

TEST(EngineBackend, RefusesBeforeQueueing) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const std::vector<int32_t> long_prompt(120, 1000);
  std::optional<ApiError> e = refusal(f, {{"prompt", long_prompt}, {"max_tokens", 16}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_NE(e->message.find("136"), std::string::npos) << e->message;  // 120 + 16 named
  e = refusal(f, {{"prompt", std::vector<int32_t>(128, 1000)}, {"max_tokens", 1}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
  e = refusal(f, {{"prompt", "x"}, {"echo", true}, {"logprobs", 1}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "echo");
  e = refusal(f, {{"prompt", ""}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "prompt");
  EXPECT_EQ(f.backend->n_in_flight(), 0u);
  EXPECT_EQ(f.engine->metrics().core.n_waiting + f.engine->metrics().core.n_running, 0);
}

TEST(EngineBackend, AbortEndsTheRequestAndFreesItsKvBlocks) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  EventCollector c;
  c.hold_first();  // else the model may finish its 100 tokens before a late-scheduled abort
  GenerationRequest g = f.request({{"prompt", "A long story"}, {"max_tokens", 100}, {"ignore_eos", true}, {"stream", true}});
  const std::string id = g.request_id;
  f.backend->submit(std::move(g), c.callback());
  ASSERT_TRUE(c.wait_first());
  f.backend->abort(id);
  c.release();
  const BackendResult r = c.wait();
  EXPECT_EQ(r.finish.at(0), "abort");
  EXPECT_LT(r.usage.completion_tokens, 100);
  EXPECT_EQ(f.backend->n_in_flight(), 0u);
  // The loop publishes its metrics after each turn: the blocks are back within a few turns.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (f.engine->metrics().core.kv_blocks_used != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(f.engine->metrics().core.kv_blocks_used, 0);
  EXPECT_EQ(f.engine->metrics().core.n_running, 0);
  f.backend->abort(id);  // again, and an unknown id: ignored
  f.backend->abort("no-such-request");
}

TEST(EngineBackend, LimitsHealthAndMetrics) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  EXPECT_EQ(f.backend->limits().max_model_len, testing::kTestMaxModelLen);
  EXPECT_EQ(f.backend->limits().vocab_size, 151936);
  EXPECT_TRUE(f.backend->healthy());
  f.run({{"prompt", "Count me"}, {"max_tokens", 2}, {"ignore_eos", true}});
  // A probe answered: the loop has published the metrics of its turn before it (Engine::healthy).
  ASSERT_TRUE(f.engine->healthy());
  const std::string metrics = f.backend->metrics_text();
  EXPECT_NE(metrics.find("vllm:generation_tokens_total{model_name=\"m\"} 2"), std::string::npos) << metrics;
  f.engine->stop(false);
  EXPECT_FALSE(f.backend->healthy());
  std::optional<ApiError> e = refusal(f, {{"prompt", "late"}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 503);
}

}  // namespace
}  // namespace lathe::serve

namespace lathe::serve {
namespace {

TEST(EngineBackend, UsageCountsThePromptTokensThePrefixCacheServed) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  // 40 prompt ids: 2 full blocks of 16 are cacheable (the last prompt token is always recomputed).
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(1000 + 7 * i);
  const nlohmann::json body = {{"prompt", ids}, {"max_tokens", 2}, {"ignore_eos", true}, {"n", 2}, {"seed", 1}};
  const BackendResult cold = f.run(body);
  ASSERT_FALSE(cold.error) << cold.error->message;
  EXPECT_EQ(cold.usage.cached_tokens, 0);  // the second choice shares the first's blocks: not a cache hit
  const BackendResult warm = f.run(body);
  ASSERT_FALSE(warm.error) << warm.error->message;
  EXPECT_EQ(warm.usage.prompt_tokens, 40);
  EXPECT_EQ(warm.usage.cached_tokens, 32);
  // Two prompts of one request: each counts once.
  const BackendResult two = f.run({{"prompt", {ids, ids}}, {"max_tokens", 1}, {"ignore_eos", true}});
  ASSERT_FALSE(two.error) << two.error->message;
  EXPECT_EQ(two.usage.cached_tokens, 64);
}

}  // namespace
}  // namespace lathe::serve
