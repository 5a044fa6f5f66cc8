// The engine on every fixture family: greedy tokens equal generate() and the fixture's greedy ids, and a
// request's tokens do not depend on what else runs beside it (greedy and seeded sampling), whether the
// others arrive with it or while it runs, with chunked prefill mixing prompt chunks and decodes; greedy
// tokens stay batch-invariant over a bf16 and an int8 KV cache too.
#include "lathe/serve/engine/engine.h"

#include <gtest/gtest.h>

#include "lathe/infer/generate.h"
#include "lathe/serve/engine/engine_test_util.h"

namespace lathe {
namespace {

using testing::Completion;
using testing::load_engine_fixture;
using testing::read_all;

class EngineFamily : public ::testing::TestWithParam<std::string> {};

// A small step budget and chunk cap: prompts are prefilled in chunks, beside other requests' decodes.
EngineConfig chunked_config(KvCacheDtype kv = KvCacheDtype::kAuto) {
  return {.kv_cache_dtype = kv,
          .scheduler = {.max_num_batched_tokens = 24, .max_num_partial_prefills = 2,
                        .long_prefill_token_threshold = 8}};
}

TEST_P(EngineFamily, GreedyTokensEqualGenerateAndTheFixture) {
  const testing::EngineFixture f = load_engine_fixture(GetParam());
  const int n_new = static_cast<int>(f.greedy_output.size());
  ASSERT_GT(n_new, 0);
  const Completion c = testing::run_alone(*f.model, {}, testing::greedy_request(f.greedy_prompt, n_new));
  EXPECT_EQ(c.tokens.at(0), f.greedy_output);
  EXPECT_EQ(c.finish.at(0), FinishReason::kLength);

  const GenerateResult g = generate(*f.model, f.greedy_prompt, {.max_new_tokens = n_new, .min_new_tokens = n_new});
  EXPECT_EQ(std::vector<int32_t>(g.tokens.begin() + g.n_prompt, g.tokens.end()), c.tokens.at(0));
  // Chunked prefill (8-token chunks) gives the same tokens.
  EXPECT_EQ(testing::run_alone(*f.model, chunked_config(), testing::greedy_request(f.greedy_prompt, n_new)).tokens.at(0),
            f.greedy_output);
}

// 16 requests of other lengths (and output lengths) beside the fixture's greedy prompt.
std::vector<EngineRequest> mixed_requests(const testing::EngineFixture& f, const SamplingParams& target_sampling) {
  std::vector<EngineRequest> rs;
  rs.push_back({.prompt = f.greedy_prompt, .sampling = target_sampling});
  const auto prompts = testing::varied_prompts(16, 40, f.model->config().vocab_size, 7);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r = testing::greedy_request(prompts[i], 4 + static_cast<int>(i % 9));
    if (i % 3 == 1) r.sampling.temperature = 1.f;  // some sample (unseeded: the engine draws their seeds)
    rs.push_back(std::move(r));
  }
  return rs;
}

// Runs `rs` on one engine: all submitted together, or (staggered) half of them, then the rest once the
// first has its first token.
std::vector<Completion> run_together(Model& model, const std::vector<EngineRequest>& rs, bool staggered,
                                     KvCacheDtype kv) {
  Engine engine(model, chunked_config(kv));
  std::vector<Submission> subs;
  std::optional<EngineOutput> first;
  const size_t n_first = staggered ? rs.size() / 2 : rs.size();
  for (size_t i = 0; i < n_first; ++i) subs.push_back(engine.submit(rs[i]));
  if (staggered) {
    first = subs[0].stream->next();
    for (size_t i = n_first; i < rs.size(); ++i) subs.push_back(engine.submit(rs[i]));
  }
  std::vector<Completion> out;
  for (Submission& s : subs) out.push_back(read_all(*s.stream));
  if (first && first->token) out[0].tokens[0].insert(out[0].tokens[0].begin(), *first->token);
  // They did run together: fewer steps than tokens (one at a time would take one step per token at least).
  int64_t n_tokens = 0;
  for (const EngineRequest& r : rs) n_tokens += r.sampling.max_tokens;
  EXPECT_TRUE(engine.healthy());
  EXPECT_LT(engine.metrics().core.n_steps, n_tokens / 2);
  return out;
}

void expect_batch_invariant(const testing::EngineFixture& f, const SamplingParams& target,
                            KvCacheDtype kv = KvCacheDtype::kAuto) {
  const std::vector<EngineRequest> rs = mixed_requests(f, target);
  const EngineConfig alone_config{.kv_cache_dtype = kv};
  const Completion alone = testing::run_alone(*f.model, alone_config, rs[0]);
  ASSERT_EQ(alone.tokens.at(0).size(), static_cast<size_t>(target.max_tokens));
  for (const bool staggered : {false, true}) {
    const std::vector<Completion> together = run_together(*f.model, rs, staggered, kv);
    EXPECT_EQ(together[0].tokens.at(0), alone.tokens.at(0)) << (staggered ? "staggered" : "submitted together");
    // The greedy neighbours are invariant too.
    for (size_t i = 1; i < rs.size(); ++i) {
      if (!is_greedy(rs[i].sampling)) continue;
      EXPECT_EQ(together[i].tokens.at(0), testing::run_alone(*f.model, alone_config, rs[i]).tokens.at(0))
          << "request " << i << (staggered ? " staggered" : " submitted together");
    }
  }
}

TEST_P(EngineFamily, GreedyTokensAreTheSameAloneAndAmong16Others) {
  const testing::EngineFixture f = load_engine_fixture(GetParam());
  expect_batch_invariant(f, testing::greedy_request({}, static_cast<int>(f.greedy_output.size())).sampling);
}

// The fixtures load as f32, so auto is f32 above: here K and V are rounded to bf16 when written.
TEST_P(EngineFamily, GreedyTokensOverBf16KvAreTheSameAloneAndAmong16Others) {
  const testing::EngineFixture f = load_engine_fixture(GetParam());
  ASSERT_EQ(Engine(*f.model, {.kv_cache_dtype = KvCacheDtype::kBF16}).capacity_summary().find("KV cache (bf16)"), 0u);
  expect_batch_invariant(f, testing::greedy_request({}, static_cast<int>(f.greedy_output.size())).sampling,
                         KvCacheDtype::kBF16);
}

// Over an int8 cache: K and V quantised per (token, KV head) when written; a row's codes and scale depend
// on that row alone, so batching changes nothing here either.
TEST_P(EngineFamily, GreedyTokensOverInt8KvAreTheSameAloneAndAmong16Others) {
  const testing::EngineFixture f = load_engine_fixture(GetParam());
  ASSERT_EQ(Engine(*f.model, {.kv_cache_dtype = KvCacheDtype::kInt8}).capacity_summary().find("KV cache (int8)"), 0u);
  expect_batch_invariant(f, testing::greedy_request({}, static_cast<int>(f.greedy_output.size())).sampling,
                         KvCacheDtype::kInt8);
}

TEST_P(EngineFamily, SeededSampleIsTheSameAloneAndAmong16Others) {
  const testing::EngineFixture f = load_engine_fixture(GetParam());
  expect_batch_invariant(f, {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .max_tokens = 12, .ignore_eos = true,
                             .seed = 1234});
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EngineFamily, ::testing::ValuesIn(testing::fixture_model_names("reference.json")));

}  // namespace
}  // namespace lathe
