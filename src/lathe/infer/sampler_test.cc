// The sampler against the formulas of serving spec §6: every parameter on hand-built logits (expected
// values computed here from the formula), the order of application, greedy ties, min_tokens, logprobs,
// reproducibility whatever the batch, the sampled distribution, and no allocation once warm.
#include "lathe/infer/sampler.h"
#include "lathe/infer/sampler_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"

namespace lathe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A logprob is an f32 logit minus an f64 log-sum-exp, rounded to f32: a few f32 ulps of its magnitude.
constexpr double kLogprobTol = 2e-6, kLogprobRtol = 0x1.0p-21;

std::vector<float> random_logits(int64_t V, uint64_t seed, float scale = 3.f) {
  CounterRng g{.key = seed};
  std::vector<float> x(static_cast<size_t>(V));
  for (float& v : x) v = scale * g.next_normal();
  return x;
}

std::vector<double> log_softmax(const std::vector<double>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (double v : z) s += std::exp(v - m);
  std::vector<double> r(z.size());
  for (size_t i = 0; i < z.size(); ++i) r[i] = z[i] - m - std::log(s);
  return r;
}

struct Row {
  int32_t token = -1;
  std::vector<double> logprob;  // [V] by token id: the full processed (or raw) distribution reported
};

// Samples one row with `p` after `output` was generated from `prompt`; asks for every logprob.
Row sample_one(SamplingParams p, const std::vector<float>& x, const std::vector<int32_t>& prompt = {},
               const std::vector<int32_t>& output = {}, const std::vector<int32_t>& eos = {}) {
  const auto V = static_cast<int64_t>(x.size());
  p.logprobs = -1;
  if (!p.seed) p.seed = 1;
  p.max_tokens = std::max<int>(p.max_tokens, static_cast<int>(output.size()) + 1);
  SamplingState s(p, {.prompt = prompt, .eos_token_ids = eos, .seed = *p.seed, .vocab = V});
  for (int32_t t : output) s.append(t);
  Sampler sampler(V);
  SamplingState* rows[] = {&s};
  SampledToken out[1];
  sampler.sample(x.data(), rows, out);
  Row r{.token = out[0].token, .logprob = std::vector<double>(static_cast<size_t>(V), kInf)};
  EXPECT_EQ(out[0].top.size(), static_cast<size_t>(V));
  for (const TopLogprob& t : out[0].top) r.logprob[t.token] = t.logprob;
  return r;
}

SamplingParams processed(SamplingParams p) {
  p.logprobs_mode = LogprobsMode::kProcessed;
  return p;
}

void expect_logprobs_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t v = 0; v < want.size(); ++v) {
    if (std::isinf(want[v])) {
      EXPECT_EQ(got[v], want[v]) << "token " << v;
    } else {
      EXPECT_NEAR(got[v], want[v], kLogprobTol + kLogprobRtol * std::fabs(want[v])) << "token " << v;
    }
  }
}

std::vector<double> as_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

void expect_rejected(const SamplingParams& p, const std::string& field, int64_t V = 10) {
  try {
    check_sampling_params(p, V);
    ADD_FAILURE() << field << " accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
  EXPECT_THROW(SamplingState(p, {.vocab = V}), InvalidArgument) << field;
}

TEST(SamplingParams, OutOfRangeValuesAreRejectedNamingTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_rejected({.n = 0}, "n must");
  expect_rejected({.temperature = -0.5f}, "temperature");
  expect_rejected({.temperature = nan}, "temperature");
  expect_rejected({.top_k = -2}, "top_k");
  expect_rejected({.top_p = 0.f}, "top_p");
  expect_rejected({.top_p = 1.5f}, "top_p");
  expect_rejected({.min_p = -0.1f}, "min_p");
  expect_rejected({.min_p = 1.1f}, "min_p");
  expect_rejected({.presence_penalty = 2.5f}, "presence_penalty");
  expect_rejected({.frequency_penalty = -2.01f}, "frequency_penalty");
  expect_rejected({.frequency_penalty = nan}, "frequency_penalty");
  expect_rejected({.repetition_penalty = 0.f}, "repetition_penalty");
  expect_rejected({.logit_bias = {{10, 1.f}}}, "logit_bias");
  expect_rejected({.logit_bias = {{-1, 1.f}}}, "logit_bias");
  expect_rejected({.logit_bias = {{3, 100.5f}}}, "logit_bias");
  expect_rejected({.logit_bias = {{3, -101.f}}}, "logit_bias");
  expect_rejected({.max_tokens = 0}, "max_tokens");
  expect_rejected({.max_tokens = 4, .min_tokens = 5}, "min_tokens");
  expect_rejected({.stop_token_ids = {10}}, "stop_token_ids");
  expect_rejected({.logprobs = 21}, "logprobs");
  expect_rejected({.logprobs = -2}, "logprobs");
  expect_rejected({.prompt_logprobs = 21}, "prompt_logprobs");
  EXPECT_NO_THROW(check_sampling_params({}, 10));
  EXPECT_NO_THROW(check_sampling_params({.top_k = -1, .logit_bias = {{9, 100.f}, {0, -100.f}}, .logprobs = -1}, 10));
  EXPECT_THROW(SamplingState({}, {.prompt = std::vector<int32_t>{10}, .vocab = 10}), InvalidArgument);
}

TEST(SamplingParams, FinishReasonFollowsMinTokensEosAndMaxTokens) {
  const std::vector<int32_t> eos = {2};
  const SamplingParams p{.max_tokens = 5, .min_tokens = 2, .stop_token_ids = {7}};
  EXPECT_EQ(finish_reason(p, eos, 1, 2), FinishReason::kNone);  // below min_tokens
  EXPECT_EQ(finish_reason(p, eos, 2, 2), FinishReason::kStop);
  EXPECT_EQ(finish_reason(p, eos, 3, 7), FinishReason::kStop);
  EXPECT_EQ(finish_reason(p, eos, 4, 3), FinishReason::kNone);
  EXPECT_EQ(finish_reason(p, eos, 5, 3), FinishReason::kLength);
  SamplingParams ignore = p;
  ignore.ignore_eos = true;
  EXPECT_EQ(finish_reason(ignore, eos, 3, 2), FinishReason::kNone);
  EXPECT_EQ(finish_reason(ignore, eos, 3, 7), FinishReason::kStop);
}

TEST(Sampler, GreedyTakesTheLowestIdAmongTies) {
  std::vector<float> x = {0.f, 1.f, 3.f, -2.f, 3.f, 3.f, 1.f};
  EXPECT_EQ(sample_one({.temperature = 0.f}, x).token, 2);
  EXPECT_EQ(sample_one({.temperature = 0.9e-5f}, x).token, 2);  // below 1e-5 is greedy too
  x[2] = -5.f;
  EXPECT_EQ(sample_one({.temperature = 0.f}, x).token, 4);
  // Greedy's processed logprobs are the penalised logits' log_softmax, with no temperature.
  expect_logprobs_near(sample_one(processed({.temperature = 0.f}), x).logprob, log_softmax(as_double(x)));
}

TEST(Sampler, RawLogprobsAreTheModelsLogSoftmaxWhateverTheProcessing) {
  const std::vector<float> x = random_logits(300, 11);
  const Row r = sample_one({.temperature = 0.7f, .top_k = 5, .repetition_penalty = 1.3f, .logit_bias = {{4, 3.f}}}, x,
                           {4, 5, 6}, {7});
  expect_logprobs_near(r.logprob, log_softmax(as_double(x)));
}

TEST(Sampler, TemperatureDividesTheLogits) {
  const std::vector<float> x = random_logits(257, 3);
  for (const float T : {0.25f, 1.f, 1.7f}) {
    std::vector<double> z(x.size());
    for (size_t v = 0; v < x.size(); ++v) z[v] = static_cast<double>(x[v] / T);
    expect_logprobs_near(sample_one(processed({.temperature = T}), x).logprob, log_softmax(z));
  }
}

TEST(Sampler, PenaltiesFollowTheirFormulas) {
  const int64_t V = 40;
  const std::vector<float> x = random_logits(V, 5);
  const std::vector<int32_t> prompt = {1, 2, 2, 3, 30};
  const std::vector<int32_t> output = {3, 4, 4, 4, 5, 30, 31, 31};
  const float r = 1.4f, freq = 0.6f, pres = -0.3f;
  const SamplingParams p{.temperature = 0.f, .presence_penalty = pres, .frequency_penalty = freq, .repetition_penalty = r};
  std::vector<double> z(x.begin(), x.end());
  for (int64_t v = 0; v < V; ++v) {
    const auto count = std::count(output.begin(), output.end(), v);
    const bool seen = count > 0 || std::count(prompt.begin(), prompt.end(), v) > 0;
    float zv = x[v];
    if (seen) zv = zv > 0.f ? zv / r : zv * r;
    zv -= freq * static_cast<float>(count);
    zv -= pres * static_cast<float>(count > 0);
    z[v] = zv;
  }
  expect_logprobs_near(sample_one(processed(p), x, prompt, output).logprob, log_softmax(z));
  // Presence and frequency see generated tokens only: a prompt-only token keeps its logit without r.
  const SamplingParams no_rep{.temperature = 0.f, .presence_penalty = 1.f, .frequency_penalty = 1.f};
  const Row q = sample_one(processed(no_rep), x, prompt, {});
  expect_logprobs_near(q.logprob, log_softmax(as_double(x)));
}

TEST(Sampler, LogitBiasAndMinTokensMaskEosAndStopIdsUntilReached) {
  const int64_t V = 12;
  std::vector<float> x = random_logits(V, 8);
  x[2] = 20.f;  // EOS would win greedy
  x[9] = 19.f;  // then the stop token
  const std::vector<int32_t> eos = {2};
  const SamplingParams p{.temperature = 0.f, .logit_bias = {{5, 1.5f}, {6, -4.f}}, .max_tokens = 8, .min_tokens = 3,
                         .stop_token_ids = {9}, .logprobs_mode = LogprobsMode::kProcessed};
  std::vector<double> z(x.begin(), x.end());
  z[5] = x[5] + 1.5f;
  z[6] = x[6] - 4.f;
  std::vector<double> masked = z;
  masked[2] = masked[9] = -kInf;
  const Row before = sample_one(p, x, {}, {0, 1}, eos);  // 2 outputs < min_tokens = 3
  EXPECT_NE(before.token, 2);
  EXPECT_NE(before.token, 9);
  expect_logprobs_near(before.logprob, log_softmax(masked));
  const Row reached = sample_one(p, x, {}, {0, 1, 3}, eos);
  EXPECT_EQ(reached.token, 2);
  expect_logprobs_near(reached.logprob, log_softmax(z));
  SamplingParams ignore = p;
  ignore.ignore_eos = true;  // EOS is not masked, the stop id still is
  EXPECT_EQ(sample_one(ignore, x, {}, {0}, eos).token, 2);
}

// p_v = softmax(z)_v with z = x / T; the survivors' log-probs after a filter are log(p_v / Σ_kept p).
std::vector<double> kept_log_softmax(const std::vector<double>& z, const std::vector<bool>& keep) {
  std::vector<double> m = z;
  for (size_t v = 0; v < z.size(); ++v)
    if (!keep[v]) m[v] = -kInf;
  return log_softmax(m);
}

std::vector<double> scaled(const std::vector<float>& x, float T) {
  std::vector<double> z(x.size());
  for (size_t v = 0; v < x.size(); ++v) z[v] = static_cast<double>(x[v] / T);
  return z;
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheMax) {
  const std::vector<float> x = random_logits(500, 21);
  const float T = 0.8f, min_p = 0.05f;
  const std::vector<double> z = scaled(x, T);
  const double zmax = *std::max_element(z.begin(), z.end());
  std::vector<bool> keep(z.size());
  for (size_t v = 0; v < z.size(); ++v) keep[v] = std::exp(z[v] - zmax) >= min_p;  // p_v >= min_p · p_max
  ASSERT_GT(std::count(keep.begin(), keep.end(), true), 3);
  expect_logprobs_near(sample_one(processed({.temperature = T, .min_p = min_p}), x).logprob, kept_log_softmax(z, keep));
}

TEST(Sampler, TopKKeepsTheKLargest) {
  std::vector<float> x = random_logits(1000, 4);
  x[10] = x[11] = 50.f;  // a tie at the top: both kept
  for (const int k : {1, 2, 7, 999}) {
    const std::vector<double> z = scaled(x, 1.f);
    std::vector<int32_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
    std::vector<bool> keep(z.size());
    for (int i = 0; i < k; ++i) keep[order[i]] = true;
    expect_logprobs_near(sample_one(processed({.top_k = k}), x).logprob, kept_log_softmax(z, keep));
  }
  EXPECT_EQ(sample_one({.top_k = 1}, x).token, 10);  // tie at the boundary: the lower id
}

// The nucleus by its definition: sort by probability (then id), keep the shortest prefix reaching p.
std::vector<bool> nucleus(const std::vector<double>& z, const std::vector<bool>& alive, double top_p) {
  std::vector<int32_t> order;
  for (size_t v = 0; v < z.size(); ++v)
    if (alive[v]) order.push_back(static_cast<int32_t>(v));
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  double total = 0;
  for (int32_t v : order) total += std::exp(z[v]);
  std::vector<bool> keep(z.size());
  double cum = 0;
  for (int32_t v : order) {
    keep[v] = true;
    cum += std::exp(z[v]);
    if (cum >= top_p * total) break;
  }
  return keep;
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  for (const int64_t V : {9, 200, 5000}) {
    const std::vector<float> x = random_logits(V, static_cast<uint64_t>(V), 2.f);
    for (const float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
      const std::vector<double> z = scaled(x, 1.3f);
      const std::vector<bool> keep = nucleus(z, std::vector<bool>(z.size(), true), top_p);
      expect_logprobs_near(sample_one(processed({.temperature = 1.3f, .top_p = top_p}), x).logprob,
                           kept_log_softmax(z, keep));
    }
  }
}

TEST(Sampler, OrderOfApplication) {
  // A frequency penalty applies before top-k: the penalised favourite loses its place.
  const std::vector<float> x = {5.f, 4.5f, 1.f, 0.f};
  EXPECT_EQ(sample_one({.top_k = 1}, x).token, 0);
  EXPECT_EQ(sample_one({.top_k = 1, .frequency_penalty = 1.f}, x, {}, {0}).token, 1);
  // logit_bias applies before top-k and greedy alike.
  EXPECT_EQ(sample_one({.top_k = 1, .logit_bias = {{3, 6.f}}}, x).token, 3);
  // Temperature applies before min_p: the same min_p keeps more tokens at a higher temperature.
  const std::vector<float> y = random_logits(64, 9);
  auto kept = [&](float T) {
    const Row r = sample_one(processed({.temperature = T, .min_p = 0.1f}), y);
    return std::count_if(r.logprob.begin(), r.logprob.end(), [](double l) { return l > -kInf; });
  };
  EXPECT_LT(kept(0.5f), kept(2.f));
  // top-p applies after top-k, on the top-k survivors renormalised.
  const std::vector<double> z = scaled(y, 1.f);
  std::vector<int32_t> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  std::vector<bool> top8(z.size());
  for (int i = 0; i < 8; ++i) top8[order[i]] = true;
  expect_logprobs_near(sample_one(processed({.top_k = 8, .top_p = 0.6f}), y).logprob,
                       kept_log_softmax(z, nucleus(z, top8, 0.6)));
}

TEST(Sampler, TopLogprobsAreSortedAndIncludeTheSampledToken) {
  const int64_t V = 100;
  const std::vector<float> x = random_logits(V, 31);
  const std::vector<double> want = log_softmax(as_double(x));
  const int32_t best = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  const int32_t forced = best == 7 ? 8 : 7;
  // Greedy on a biased token: the raw top-3 does not hold it, so it comes 4th (logprobs + 1 entries).
  SamplingParams p{.temperature = 0.f, .logit_bias = {{forced, 100.f}}, .logprobs = 3};
  SamplingState s(p, {.seed = 1, .vocab = V});
  Sampler sampler(V);
  SamplingState* rows[] = {&s};
  SampledToken out[1];
  sampler.sample(x.data(), rows, out);
  ASSERT_EQ(out[0].token, forced);
  EXPECT_NEAR(out[0].logprob, want[forced], kLogprobTol);
  EXPECT_EQ(out[0].rank, 1 + std::count_if(x.begin(), x.end(), [&](float v) { return v > x[forced]; }));
  ASSERT_EQ(out[0].top.size(), 4u);
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[0].top[i].token, order[i]);
    EXPECT_NEAR(out[0].top[i].logprob, want[order[i]], kLogprobTol);
  }
  EXPECT_EQ(out[0].top[3].token, forced);
  // logprobs = 0: the sampled token alone; a sampled token inside the top set is not repeated.
  SamplingState zero({.temperature = 0.f, .logprobs = 0}, {.vocab = V});
  SamplingState two({.temperature = 0.f, .logprobs = 2}, {.vocab = V});
  SamplingState* rows2[] = {&zero, &two};
  std::vector<float> xx(x);
  xx.insert(xx.end(), x.begin(), x.end());
  SampledToken out2[2];
  sampler.sample(xx.data(), rows2, out2);
  ASSERT_EQ(out2[0].top.size(), 1u);
  EXPECT_EQ(out2[0].top[0].token, best);
  ASSERT_EQ(out2[1].top.size(), 2u);
  EXPECT_EQ(out2[1].top[0].token, best);
  // Prompt logprobs: raw, the given next token's, plus the top k.
  std::vector<TopLogprob> buf(6);
  const SampledToken pl = sampler.prompt_logprobs(x.data(), 13, 5, buf);
  EXPECT_NEAR(pl.logprob, want[13], kLogprobTol);
  EXPECT_EQ(pl.top.size(), order[0] == 13 || std::find(order.begin(), order.begin() + 5, 13) != order.begin() + 5 ? 5u : 6u);
  EXPECT_EQ(pl.top[0].token, order[0]);
  EXPECT_THROW(sampler.prompt_logprobs(x.data(), 13, 5, std::span(buf).first(5)), InvalidArgument);
}

// A mixed set of requests, each with its own parameters and seed.
std::vector<SamplingParams> mixed_requests(int n) {
  std::vector<SamplingParams> r;
  for (int i = 0; i < n; ++i) {
    SamplingParams p{.temperature = 0.5f + 0.1f * static_cast<float>(i % 7), .max_tokens = 64, .seed = 1000 + i};
    if (i % 2) p.top_k = 3 + i;
    if (i % 3 == 0) p.top_p = 0.8f;
    if (i % 4 == 1) p.min_p = 0.02f;
    if (i % 5 == 2) p.repetition_penalty = 1.2f, p.frequency_penalty = 0.3f, p.presence_penalty = 0.2f;
    if (i % 6 == 3) p.temperature = 0.f;
    if (i % 4 == 0) p.logprobs = 2, p.logprobs_mode = i % 8 ? LogprobsMode::kProcessed : LogprobsMode::kRaw;
    r.push_back(p);
  }
  return r;
}

// Tokens of each request over `steps` steps, batched in `order`; logits depend on (request, step) only.
std::vector<std::vector<int32_t>> run_batch(const std::vector<SamplingParams>& reqs, const std::vector<int>& order,
                                            int64_t V, int steps) {
  std::vector<SamplingState> states;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::vector<int32_t> prompt = {static_cast<int32_t>(i), 3, 5};
    states.emplace_back(reqs[i], SamplingStateOptions{.prompt = prompt, .seed = *reqs[i].seed, .vocab = V});
  }
  Sampler sampler(V);
  std::vector<float> logits(order.size() * static_cast<size_t>(V));
  std::vector<SamplingState*> rows;
  std::vector<SampledToken> out(order.size());
  for (int t = 0; t < steps; ++t) {
    rows.clear();
    for (size_t j = 0; j < order.size(); ++j) {
      const std::vector<float> x = random_logits(V, static_cast<uint64_t>(order[j]) * 1000 + t, 1.5f);
      std::copy(x.begin(), x.end(), logits.begin() + static_cast<int64_t>(j) * V);
      rows.push_back(&states[order[j]]);
    }
    sampler.sample(logits.data(), rows, out);
  }
  std::vector<std::vector<int32_t>> tokens;
  for (const SamplingState& s : states) tokens.emplace_back(s.output().begin(), s.output().end());
  return tokens;
}

TEST(Sampler, SeededTokensDoNotDependOnTheBatch) {
  const int64_t V = 3000;
  const int n = 16, steps = 12;
  const std::vector<SamplingParams> reqs = mixed_requests(n);
  std::vector<int> all(n), reversed(n);
  std::iota(all.begin(), all.end(), 0);
  std::reverse_copy(all.begin(), all.end(), reversed.begin());
  const auto batched = run_batch(reqs, all, V, steps);
  Context two(2);
  ContextScope scope(two);  // rows on two workers, in the reverse order
  const auto backwards = run_batch(reqs, reversed, V, steps);
  for (int i = 0; i < n; ++i) {
    const auto alone = run_batch(reqs, {i}, V, steps);  // request i alone (the others are never sampled)
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(steps));
    EXPECT_EQ(alone[i], batched[i]) << "request " << i << " alone vs batched";
    EXPECT_EQ(backwards[i], batched[i]) << "request " << i << " in reverse order";
  }
  // Different seeds give different streams (the test can fail).
  std::vector<SamplingParams> reseeded = reqs;
  for (SamplingParams& p : reseeded) *p.seed += 1;
  const auto other = run_batch(reseeded, all, V, steps);
  int differ = 0;
  for (int i = 0; i < n; ++i) differ += other[i] != batched[i];
  EXPECT_GE(differ, n / 2);
}

// Wilson-Hilferty: the chi-square quantile with `df` degrees of freedom at a standard-normal z.
double chi_square_quantile(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Counts of `draws` samples of one row over consecutive steps (each step is an independent draw).
std::vector<int64_t> histogram(const SamplingParams& p, const std::vector<float>& x, int draws) {
  const auto V = static_cast<int64_t>(x.size());
  SamplingParams q = p;
  q.max_tokens = draws;
  SamplingState s(q, {.seed = *q.seed, .vocab = V});
  Sampler sampler(V);
  SamplingState* rows[] = {&s};
  SampledToken out[1];
  for (int i = 0; i < draws; ++i) sampler.sample(x.data(), rows, out);
  std::vector<int64_t> c(static_cast<size_t>(V));
  for (int32_t t : s.output()) ++c[t];
  return c;
}

void expect_matches(const std::vector<int64_t>& counts, const std::vector<double>& logp, int draws) {
  double chi2 = 0;
  int cells = 0;
  for (size_t v = 0; v < counts.size(); ++v) {
    if (std::isinf(logp[v])) {
      EXPECT_EQ(counts[v], 0) << "filtered token " << v << " was sampled";
      continue;
    }
    const double e = draws * std::exp(logp[v]);
    chi2 += (counts[v] - e) * (counts[v] - e) / e;
    ++cells;
  }
  // z = 4.75: a false alarm once in 10^6 for a correct sampler; these seeds are fixed, so it is stable.
  EXPECT_LT(chi2, chi_square_quantile(cells - 1, 4.75)) << cells << " cells";
}

TEST(Sampler, DrawsFollowTheFilteredSoftmax) {
  const int draws = 40000;
  const std::vector<float> x = {1.f, 0.5f, -0.3f, 2.f, 0.f, 1.2f, -1.f, 0.7f, 1.9f, -2.f};
  for (const uint64_t seed : {1u, 77u}) {
    const SamplingParams plain{.temperature = 0.7f, .seed = seed};
    expect_matches(histogram(plain, x, draws), log_softmax(scaled(x, 0.7f)), draws);
    const SamplingParams filtered{.temperature = 1.3f, .top_k = 6, .top_p = 0.9f, .seed = seed};
    expect_matches(histogram(filtered, x, draws), sample_one(processed(filtered), x).logprob, draws);
  }
}

TEST(Sampler, NoAllocationOnceWarm) {
  const int64_t V = 5000;
  const std::vector<SamplingParams> reqs = mixed_requests(8);
  std::vector<SamplingState> states;
  for (const SamplingParams& p : reqs)
    states.emplace_back(p, SamplingStateOptions{.prompt = std::vector<int32_t>{1, 2, 3}, .seed = *p.seed, .vocab = V});
  Sampler sampler(V);
  std::vector<SamplingState*> rows;
  for (SamplingState& s : states) rows.push_back(&s);
  std::vector<SampledToken> out(rows.size());
  std::vector<float> logits(rows.size() * static_cast<size_t>(V));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * static_cast<float>(i));
  sampler.sample(logits.data(), rows, out);  // warms the scratch
  auto footprint = [&] { return sampler_heap_footprint(sampler, states); };
  const size_t before = footprint();
  const TopLogprob* top_before = nullptr;
  for (int t = 1; t < 60; ++t) {
    sampler.sample(logits.data(), rows, out);
    if (t == 1) top_before = out[0].top.data();
  }
  EXPECT_EQ(footprint(), before);
  EXPECT_EQ(out[0].top.data(), top_before);
  EXPECT_EQ(states[0].output().size(), 60u);
}

}  // namespace
}  // namespace lathe
