// On-policy batches: each example's prompt is everything before its last trained run (a prompt-completion row's
// prompt, a conversation's turns before the last answer), and the rebuilt batch is prompt + sample with the
// prompt's tokens and positions untouched, every sampled token a target, nothing else trained, and the examples
// in their order; an example without trained targets stays as it was.
#include "lathe/posttrain/onpolicy_batch.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"

namespace lathe::posttrain {
namespace {

TokenizedExample example(std::vector<int32_t> ids, std::vector<uint8_t> supervised) {
  TokenizedExample e;
  e.ids = std::move(ids);
  e.supervised = std::move(supervised);
  return e;
}

// Three examples, the first two packed into one row (bfd keeps each its own positions):
//   a: prompt 10 11 12, answer 13 14         (prompt-completion: the answer trained)
//   b: 20 21 [22 23] 24 25 [26 27 28]         (two assistant turns: the last one is the completion)
//   c: 30 31 32, nothing trained
SftBatch three_examples() {
  const TokenizedExample a = example({10, 11, 12, 13, 14}, {0, 0, 0, 1, 1});
  const TokenizedExample b = example({20, 21, 22, 23, 24, 25, 26, 27, 28}, {0, 0, 1, 1, 0, 0, 1, 1, 1});
  const TokenizedExample c = example({30, 31, 32}, {0, 0, 0});
  const std::vector<SftRow> rows = build_rows(std::vector<TokenizedExample>{a, b}, Packing::kBfd, 64);
  EXPECT_EQ(rows.size(), 1u);
  SftBatch batch;
  for (const SftRow& r : rows) batch.append(r);
  batch.append(example_row(c, 2));
  return batch;
}

TEST(OnPolicyBatch, PromptsEndWhereTheLastTrainedRunStarts) {
  const SftBatch b = three_examples();
  ASSERT_EQ(b.sources.size(), 3u);
  const std::vector<std::vector<int32_t>> p = example_prompts(b);
  ASSERT_EQ(p.size(), 3u);
  // bfd places the longer example first.
  EXPECT_EQ(p[0], (std::vector<int32_t>{20, 21, 22, 23, 24, 25}));  // earlier turns are the prompt's
  EXPECT_EQ(p[1], (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(p[2], (std::vector<int32_t>{30, 31, 32}));  // untrained: all of it
}

TEST(OnPolicyBatch, SampledCompletionsAreTrainedAfterUntouchedPrompts) {
  SftBatch b = three_examples();
  b.step_targets = 99;
  const std::vector<std::vector<int32_t>> prompts = example_prompts(b);
  const std::vector<std::vector<int32_t>> completions = {{7, 8, 9, 2}, {5}, {6, 6}};
  const SftBatch out = with_completions(b, completions);
  EXPECT_EQ(out.step_targets, 0);
  ASSERT_EQ(out.sources.size(), 3u);
  int64_t at = 0, targets = 0;
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(out.sources[k].index, b.sources[k].index);
    const bool trained = k < 2;
    const std::vector<int32_t>& p = prompts[k];
    const std::vector<int32_t> c = trained ? completions[k] : std::vector<int32_t>{};
    const auto n = static_cast<int64_t>(p.size() + c.size());
    ASSERT_EQ(out.sources[k].tokens, n) << k;
    for (int64_t i = 0; i < n; ++i) {
      const auto u = static_cast<size_t>(at + i);
      const int32_t want = i < static_cast<int64_t>(p.size()) ? p[i] : c[i - p.size()];
      EXPECT_EQ(out.tokens[u], want) << k << " " << i;
      EXPECT_EQ(out.positions[u], i) << k << " " << i;  // each example from 0, as packed
      // Targets: the next token from the prompt's last token on; -100 before it and at the end.
      const bool target = trained && i + 1 >= static_cast<int64_t>(p.size()) && i + 1 < n;
      EXPECT_EQ(out.targets[u], target ? out.tokens[u + 1] : -100) << k << " " << i;
      targets += target;
    }
    at += n;
  }
  EXPECT_EQ(at, static_cast<int64_t>(out.tokens.size()));
  EXPECT_EQ(out.n_targets, targets);
  EXPECT_EQ(out.n_targets, 5);  // 4 + 1 sampled tokens; the untrained example adds none
  // The prompt tokens and positions are those of the batch.
  size_t in = 0, o = 0;
  for (size_t k = 0; k < 3; ++k) {
    for (size_t i = 0; i < prompts[k].size(); ++i) EXPECT_EQ(out.positions[o + i], b.positions[in + i]);
    in += static_cast<size_t>(b.sources[k].tokens);
    o += static_cast<size_t>(out.sources[k].tokens);
  }
}

TEST(OnPolicyBatch, OneCompletionPerExample) {
  const SftBatch b = three_examples();
  EXPECT_THROW(with_completions(b, {{1}, {2}}), InvalidArgument);
}

}  // namespace
}  // namespace lathe::posttrain
