// A bf16 KV cache on every fixture family, against an f32 one: the same decode, teacher-forced through the
// fixture's greedy tokens, moves the logits by no more than the rounding of K and V to bf16 can; greedy
// generation over a bf16 cache gives the fixture's (f32) tokens wherever no near tie lets rounding flip one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_model.h"
#include "lathe/autograd/node.h"
#include "lathe/infer/generate.h"
#include "lathe/models/paged_kv_store.h"

namespace lathe {
namespace {

class Bf16Kv : public ::testing::TestWithParam<std::string> {};

struct Greedy {
  std::vector<int32_t> prompt, output;  // reference.json greedy_prompt, and the greedy ids after it
};

Greedy load_greedy(const std::string& name) {
  std::ifstream in(testing::fixtures_root() + "/models/" + name + "/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  Greedy g;
  for (const auto& v : j["greedy_prompt"]) g.prompt.push_back(v.get<int32_t>());
  const auto& out = j["greedy_output_ids"];
  for (size_t i = g.prompt.size(); i < out.size(); ++i) g.output.push_back(out[i].get<int32_t>());
  return g;
}

// Logits [V] of every step: the prompt prefilled, then the greedy tokens fed one at a time.
std::vector<std::vector<float>> decode_logits(const Model& m, const Greedy& g, DType kv_dtype) {
  NoGradGuard no_grad;
  std::vector<int32_t> ids = g.prompt;
  ids.insert(ids.end(), g.output.begin(), g.output.end());
  const auto T = static_cast<int64_t>(ids.size());
  PagedKvStore store(paged_kv_store_config(m.config(), kv_blocks_for(T, kDefaultKvBlockSize), kDefaultKvBlockSize,
                                           kv_dtype));
  const KvSequence seq = store.allocate(T);
  std::vector<std::vector<float>> steps;
  for (int64_t start = 0, n = static_cast<int64_t>(g.prompt.size()); start < T; start += n, n = 1) {
    const SequenceChunk chunk{.tokens = std::span<const int32_t>(ids).subspan(start, n), .start = start,
                              .block_table = store.block_table(seq)};
    steps.push_back(m.forward(cached_batch(store, {&chunk, 1})).to_vector());  // [1, V]
  }
  return steps;
}

// Per decode step: the largest logit change a bf16 cache makes, and the f32 logits' top-2 gap.
struct StepDiffs {
  std::vector<double> max_abs_diff, top2_gap;
};

StepDiffs step_diffs(const Model& m, const Greedy& g) {
  const auto f32 = decode_logits(m, g, DType::kF32), bf16 = decode_logits(m, g, DType::kBF16);
  StepDiffs d;
  for (size_t t = 0; t < f32.size(); ++t) {
    double diff = 0;
    for (size_t v = 0; v < f32[t].size(); ++v) diff = std::max(diff, std::fabs(double(f32[t][v]) - bf16[t][v]));
    double first = -INFINITY, second = -INFINITY;
    for (const float x : f32[t]) {
      if (x > first) {
        second = first;
        first = x;
      } else if (x > second) {
        second = x;
      }
    }
    d.max_abs_diff.push_back(diff);
    d.top2_gap.push_back(first - second);
  }
  return d;
}

// K and V rounded to bf16 (relative error <= 2^-9) move the tiny models' logits by up to ~1e-2 (measured:
// llama 0.010, gemma3 0.0096, gpt2 0.0015); held to the 2e-2 bf16 bound, and it must move them
// at all, else nothing was rounded.
TEST_P(Bf16Kv, LogitsStayWithinKvRoundingOfTheF32Cache) {
  const auto m = testing::load_fixture_model_f32(GetParam());
  const StepDiffs d = step_diffs(*m, load_greedy(GetParam()));
  const double worst = *std::max_element(d.max_abs_diff.begin(), d.max_abs_diff.end());
  EXPECT_LE(worst, 2e-2);
  EXPECT_GT(worst, 1e-6) << "the bf16 cache changed no logit: K and V were not rounded";
  ::testing::Test::RecordProperty("bf16_kv_logits_max_abs_diff", std::to_string(worst));
}

// Greedy generate() over a bf16 cache gives the fixture's greedy tokens (those of the f32 cache) at every
// step whose f32 top-2 gap exceeds twice the logit change the bf16 cache makes there (no rounding can flip
// that argmax), for as long as it follows the fixture's path (the logits above are measured along it); a
// near-tie step may flip, and the comparison ends where one did. (Measured: all 10 tokens equal on every
// family; the first step of llama and gpt2 is a near tie.)
TEST_P(Bf16Kv, GreedyTokensMatchTheF32CacheWhereTheLogitsAllow) {
  const auto m = testing::load_fixture_model_f32(GetParam());
  const Greedy g = load_greedy(GetParam());
  const StepDiffs d = step_diffs(*m, g);
  const int n = static_cast<int>(g.output.size());
  const GenerateResult r =
      generate(*m, g.prompt, {.max_new_tokens = n, .min_new_tokens = n, .kv_cache_dtype = KvCacheDtype::kBF16});
  ASSERT_EQ(r.tokens.size(), g.prompt.size() + n);
  int checked = 0;
  for (int t = 0; t < n; ++t) {
    const bool same = r.tokens[r.n_prompt + t] == g.output[t];
    if (d.top2_gap[t] <= 2 * d.max_abs_diff[t]) {
      if (!same) break;  // a near tie flipped: the paths part here
      continue;
    }
    EXPECT_TRUE(same) << "step " << t << ": " << r.tokens[r.n_prompt + t] << " instead of " << g.output[t]
                      << " (top-2 gap " << d.top2_gap[t] << ", bf16 change " << d.max_abs_diff[t] << ")";
    ++checked;
  }
  ::testing::Test::RecordProperty("bf16_kv_greedy_steps_checked", std::to_string(checked));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Bf16Kv, ::testing::ValuesIn(testing::fixture_model_names("reference.json")));

}  // namespace
}  // namespace lathe
