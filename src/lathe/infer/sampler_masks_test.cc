// The sampler's two masks (serving spec §6, vLLM's allowed_token_ids and bad_words): a disallowed or
// banned token is never sampled, whatever the seed, greedy takes the best token left, a multi-token bad
// word bans its last token only right after its other tokens (in the output, not the prompt), masks
// come before logit_bias and the penalties, rows of one batch keep their own masks, and nothing is
// allocated per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/infer/sampler.h"
#include "lathe/infer/sampler_test_util.h"

namespace lathe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// `steps` tokens of one sequence sampled with `p` (seeded), the logits of each step from `logits_of`
// (the output so far -> [V]).
template <class LogitsOf>
std::vector<int32_t> run(SamplingParams p, int64_t V, int steps, LogitsOf logits_of,
                         const std::vector<int32_t>& prompt = {}) {
  p.max_tokens = steps;
  SamplingState s(p, {.prompt = prompt, .seed = p.seed.value_or(1), .vocab = V});
  Sampler sampler(V);
  SamplingState* rows[] = {&s};
  SampledToken out[1];
  for (int t = 0; t < steps; ++t) {
    const std::vector<float> x = logits_of(s.output());
    sampler.sample(x.data(), rows, out);
  }
  return {s.output().begin(), s.output().end()};
}

// Logits that favour the tokens in `high` by far: an unmasked sampler picks them nearly always.
std::vector<float> favouring(int64_t V, const std::set<int32_t>& high) {
  std::vector<float> x(static_cast<size_t>(V));
  for (int32_t v = 0; v < V; ++v) x[v] = high.count(v) ? 8.f : 0.1f * static_cast<float>(v % 5);
  return x;
}

void expect_rejected(const SamplingParams& p, const std::string& field) {
  try {
    check_sampling_params(p, 10);
    ADD_FAILURE() << field << " accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(SamplerMasks, IdsAreCheckedAgainstTheVocabulary) {
  expect_rejected({.allowed_token_ids = {3, 10}}, "allowed_token_ids");
  expect_rejected({.allowed_token_ids = {-1}}, "allowed_token_ids");
  expect_rejected({.bad_words_token_ids = {{1, 2}, {}}}, "bad_words");
  expect_rejected({.bad_words_token_ids = {{1, 10}}}, "bad_words");
  EXPECT_NO_THROW(check_sampling_params({.allowed_token_ids = {0, 9, 9}, .bad_words_token_ids = {{9}, {0, 1, 2}}}, 10));
}

TEST(SamplerMasks, DisallowedTokensAreNeverSampled) {
  const int64_t V = 64;
  const std::set<int32_t> allowed = {3, 17, 41, 60};
  // Every other token is far likelier: without the mask almost every draw would leave the set.
  std::set<int32_t> others;
  for (int32_t v = 0; v < V; ++v)
    if (!allowed.count(v)) others.insert(v);
  const std::vector<float> x = favouring(V, others);
  std::set<int32_t> seen;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const SamplingParams p{.temperature = 1.f, .allowed_token_ids = {allowed.begin(), allowed.end()}, .seed = seed};
    for (const int32_t t : run(p, V, 50, [&](auto) { return x; })) {
      ASSERT_TRUE(allowed.count(t)) << "token " << t << " sampled, seed " << seed;
      seen.insert(t);
    }
  }
  EXPECT_EQ(seen, allowed);  // the draw still follows the logits among the allowed ids
}

TEST(SamplerMasks, GreedyPicksTheBestAllowedToken) {
  const int64_t V = 12;
  std::vector<float> x = {0.f, 5.f, 1.f, 2.5f, 9.f, 2.5f, -1.f, 7.f, 0.f, 0.f, 0.f, 0.f};
  auto greedy = [&](SamplingParams p) { return run(p, V, 1, [&](auto) { return x; }).front(); };
  EXPECT_EQ(greedy({.temperature = 0.f}), 4);
  EXPECT_EQ(greedy({.temperature = 0.f, .allowed_token_ids = {2, 6, 1}}), 1);
  EXPECT_EQ(greedy({.temperature = 0.f, .allowed_token_ids = {5, 3, 0}}), 3);  // a tie: the lower id
  EXPECT_EQ(greedy({.temperature = 0.f, .allowed_token_ids = {8}}), 8);
}

TEST(SamplerMasks, SingleTokenBadWordsAreAlwaysBanned) {
  const int64_t V = 32;
  const std::vector<float> x = favouring(V, {7, 20});
  const SamplingParams greedy{.temperature = 0.f, .bad_words_token_ids = {{7}}};
  for (const int32_t t : run(greedy, V, 10, [&](auto) { return x; })) EXPECT_EQ(t, 20);
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const SamplingParams p{.temperature = 1.f, .bad_words_token_ids = {{20}, {7}}, .seed = seed};
    for (const int32_t t : run(p, V, 50, [&](auto) { return x; })) ASSERT_TRUE(t != 7 && t != 20) << "seed " << seed;
  }
}

// The logits of a toy model that wants to repeat 4 5 6: after 4 it prefers 5, after 5 it prefers 6,
// otherwise 4; 9 is always the runner-up.
std::vector<float> cyclic_logits(std::span<const int32_t> out) {
  std::vector<float> x(16, 0.f);
  x[9] = 2.f;
  const int32_t last = out.empty() ? -1 : out.back();
  x[last == 4 ? 5 : last == 5 ? 6 : 4] = 5.f;
  return x;
}

TEST(SamplerMasks, MultiTokenBadWordBansItsLastTokenRightAfterItsPrefix) {
  const int64_t V = 16;
  EXPECT_EQ(run({.temperature = 0.f}, V, 7, cyclic_logits), (std::vector<int32_t>{4, 5, 6, 4, 5, 6, 4}));
  // Banning "4 5 6": after 4 5 the 6 is masked, so 9 comes instead; 4 and 5 stay allowed elsewhere.
  const SamplingParams banned{.temperature = 0.f, .bad_words_token_ids = {{4, 5, 6}}};
  EXPECT_EQ(run(banned, V, 7, cyclic_logits), (std::vector<int32_t>{4, 5, 9, 4, 5, 9, 4}));
  // "5 6" (a shorter prefix) bans 6 after any 5; "4 6" never matches the output (6 never follows 4).
  const SamplingParams two{.temperature = 0.f, .bad_words_token_ids = {{5, 6}, {4, 6}}};
  EXPECT_EQ(run(two, V, 4, cyclic_logits), (std::vector<int32_t>{4, 5, 9, 4}));
  // Only the output counts (vLLM): a prompt that ends with 4 5 does not ban the first token.
  const std::vector<float> six = favouring(V, {6});
  EXPECT_EQ(run(banned, V, 1, [&](auto) { return six; }, /*prompt=*/{4, 5}).front(), 6);
  // Sampled at temperature 1, the banned sequence never appears however the seed falls.
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SamplingParams p = banned;
    p.temperature = 1.f;
    p.seed = seed;
    const std::vector<int32_t> out = run(p, V, 60, cyclic_logits);
    for (size_t i = 2; i < out.size(); ++i)
      ASSERT_FALSE(out[i - 2] == 4 && out[i - 1] == 5 && out[i] == 6) << "at " << i << ", seed " << seed;
  }
}

TEST(SamplerMasks, MasksComeBeforeLogitBiasAndPenalties) {
  const int64_t V = 8;
  const std::vector<float> x = {1.f, 0.f, 2.f, 0.f, 0.f, 3.f, 0.f, 0.f};
  auto first = [&](const SamplingParams& p) { return run(p, V, 1, [&](auto) { return x; }).front(); };
  // A +100 bias cannot bring back a disallowed or banned token (-inf + 100 = -inf).
  EXPECT_EQ(first({.temperature = 0.f, .logit_bias = {{5, 100.f}}, .allowed_token_ids = {0, 2}}), 2);
  EXPECT_EQ(first({.temperature = 0.f, .logit_bias = {{5, 100.f}}, .bad_words_token_ids = {{5}}}), 2);
  // A penalty on -inf keeps it -inf; processed logprobs show the masks.
  SamplingParams p{.temperature = 1.f, .repetition_penalty = 1.5f, .allowed_token_ids = {0, 2, 5},
                   .bad_words_token_ids = {{2}}, .seed = 3, .logprobs = -1, .logprobs_mode = LogprobsMode::kProcessed};
  p.max_tokens = 1;
  SamplingState s(p, {.prompt = std::vector<int32_t>{1, 5}, .seed = 3, .vocab = V});
  Sampler sampler(V);
  SamplingState* rows[] = {&s};
  SampledToken out[1];
  sampler.sample(x.data(), rows, out);
  std::vector<float> lp(V, 0.f);
  for (const TopLogprob& t : out[0].top) lp[t.token] = t.logprob;
  // Left: token 0 (logit 1) and token 5 (3 / 1.5 = 2, the prompt's repetition penalty).
  const double lse = std::log(std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(lp[0], 1.0 - lse, 1e-5);
  EXPECT_NEAR(lp[5], 2.0 - lse, 1e-5);
  for (const int32_t v : {1, 2, 3, 4, 6, 7}) EXPECT_EQ(lp[v], kNegInf) << v;
}

TEST(SamplerMasks, RowsOfOneBatchKeepTheirOwnMasks) {
  const int64_t V = 40;
  const int n = 6, steps = 30;
  std::vector<SamplingParams> params;
  for (int i = 0; i < n; ++i) {
    SamplingParams p{.temperature = 1.f, .max_tokens = steps, .seed = static_cast<uint64_t>(100 + i)};
    if (i % 2 == 0) p.allowed_token_ids = {i, i + 10, i + 20};
    if (i % 3 == 0) p.bad_words_token_ids = {{i + 10}};
    params.push_back(p);
  }
  std::vector<SamplingState> states;
  for (const SamplingParams& p : params) states.emplace_back(p, SamplingStateOptions{.seed = *p.seed, .vocab = V});
  std::vector<SamplingState*> rows;
  for (SamplingState& s : states) rows.push_back(&s);
  std::vector<float> logits(n * static_cast<size_t>(V));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.7f * static_cast<float>(i));
  Context two(2);
  ContextScope scope(two);  // rows on two workers
  Sampler sampler(V);
  std::vector<SampledToken> out(rows.size());
  for (int t = 0; t < steps; ++t) sampler.sample(logits.data(), rows, out);
  for (int i = 0; i < n; ++i) {
    for (const int32_t tok : states[i].output()) {
      if (i % 2 == 0) {
        EXPECT_TRUE(tok == i || tok == i + 10 || tok == i + 20) << "row " << i << " token " << tok;
      }
      if (i % 3 == 0) {
        EXPECT_NE(tok, i + 10) << "row " << i;
      }
    }
  }
}

TEST(SamplerMasks, NoAllocationOnceWarm) {
  const int64_t V = 3000;
  std::vector<SamplingState> states;
  for (int i = 0; i < 4; ++i) {
    SamplingParams p{.temperature = i == 3 ? 0.f : 0.8f, .max_tokens = 40, .seed = static_cast<uint64_t>(i)};
    std::vector<int32_t> allowed(200);
    for (int j = 0; j < 200; ++j) allowed[j] = (j * 13 + i) % static_cast<int32_t>(V);
    if (i != 1) p.allowed_token_ids = allowed;
    p.bad_words_token_ids = {{allowed[0]}, {allowed[1], allowed[2]}, {allowed[3], allowed[4], allowed[5]}};
    states.emplace_back(p, SamplingStateOptions{.seed = *p.seed, .vocab = V});
  }
  std::vector<SamplingState*> rows;
  for (SamplingState& s : states) rows.push_back(&s);
  std::vector<float> logits(rows.size() * static_cast<size_t>(V));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::cos(0.11f * static_cast<float>(i));
  Sampler sampler(V);
  std::vector<SampledToken> out(rows.size());
  sampler.sample(logits.data(), rows, out);  // warms the scratch
  auto footprint = [&] { return sampler_heap_footprint(sampler, states); };
  const size_t before = footprint();
  for (int t = 1; t < 40; ++t) sampler.sample(logits.data(), rows, out);
  EXPECT_EQ(footprint(), before);
}

}  // namespace
}  // namespace lathe
