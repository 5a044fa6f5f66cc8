// The model runner driven by hand-written SchedulerOutputs: a prompt prefilled in two chunks samples only
// after its last chunk, decodes continue it, and the tokens are the fixture's greedy ids.
#include "lathe/serve/engine/model_runner.h"

#include <gtest/gtest.h>

#include "lathe/serve/engine/engine_test_util.h"

namespace lathe {
namespace {

std::shared_ptr<const SchedRequestParams> greedy_params(int max_tokens, std::optional<uint64_t> seed = 0) {
  SchedRequestParams p{.max_tokens = max_tokens, .ignore_eos = true,
                       .sampling = {.temperature = 0.f, .max_tokens = max_tokens, .ignore_eos = true, .seed = seed}};
  return std::make_shared<const SchedRequestParams>(std::move(p));
}

TEST(ModelRunner, ChunkedPrefillSamplesAfterTheLastChunkAndDecodesTheFixtureIds) {
  const testing::EngineFixture f = testing::load_engine_fixture("llama");
  const std::vector<int32_t>& prompt = f.greedy_prompt;  // 5 tokens
  ASSERT_GE(f.greedy_output.size(), 3u);
  ModelRunner runner(*f.model, {.n_blocks = 4});
  const uint64_t id = 9;

  // Step 1: tokens [0, 3) of the prompt, a partial prefill: nothing is sampled.
  SchedulerOutput s1{.step = 1, .num_scheduled_tokens = {{id, 3}}, .total_num_scheduled_tokens = 3};
  s1.new_seqs.push_back({.seq_id = id, .request_id = 1, .token_ids = prompt, .params = greedy_params(8),
                         .block_ids = {1}});
  EXPECT_TRUE(runner.execute(s1).sampled.empty());
  // Step 2: the rest of the prompt reaches its last token: one token.
  SchedulerOutput s2{.step = 2, .num_scheduled_tokens = {{id, 2}}, .total_num_scheduled_tokens = 2};
  s2.cached_seqs.push_back({.seq_id = id, .num_computed_tokens = 3});
  ModelRunnerOutput o2 = runner.execute(s2);
  ASSERT_EQ(o2.sampled.size(), 1u);
  EXPECT_EQ(o2.sampled.at(id), f.greedy_output[0]);
  EXPECT_TRUE(o2.logprobs.empty());  // not asked for
  // Steps 3, 4: decodes (8 positions in all: block 1 holds them).
  for (size_t t = 1; t < 3; ++t) {
    SchedulerOutput s{.step = static_cast<int64_t>(2 + t), .num_scheduled_tokens = {{id, 1}},
                      .total_num_scheduled_tokens = 1};
    s.cached_seqs.push_back({.seq_id = id, .num_computed_tokens = static_cast<int64_t>(prompt.size() + t - 1)});
    EXPECT_EQ(runner.execute(s).sampled.at(id), f.greedy_output[t]) << "decode " << t;
  }
  EXPECT_EQ(runner.n_seqs(), 1);
  // finished_ids drop the state; a step with no tokens runs nothing.
  EXPECT_TRUE(runner.execute({.step = 5, .finished_ids = {id}}).sampled.empty());
  EXPECT_EQ(runner.n_seqs(), 0);
}

TEST(ModelRunner, RejectsInconsistentOutputs) {
  const testing::EngineFixture f = testing::load_engine_fixture("llama");
  ModelRunner runner(*f.model, {.n_blocks = 4});
  SchedulerOutput unknown{.num_scheduled_tokens = {{3, 1}}, .total_num_scheduled_tokens = 1};
  unknown.cached_seqs.push_back({.seq_id = 3, .num_computed_tokens = 0});
  EXPECT_THROW(runner.execute(unknown), InvalidArgument);

  SchedulerOutput unseeded{.num_scheduled_tokens = {{4, 2}}, .total_num_scheduled_tokens = 2};
  unseeded.new_seqs.push_back({.seq_id = 4, .token_ids = {1, 2}, .params = greedy_params(4, std::nullopt),
                               .block_ids = {1}});
  EXPECT_THROW(runner.execute(unseeded), InvalidArgument);

  SchedulerOutput past_end{.num_scheduled_tokens = {{5, 3}}, .total_num_scheduled_tokens = 3};
  past_end.new_seqs.push_back({.seq_id = 5, .token_ids = {1, 2}, .params = greedy_params(4), .block_ids = {1}});
  EXPECT_THROW(runner.execute(past_end), InvalidArgument);
}

TEST(ModelRunner, ChoiceSeedsAreTheRequestSeedThenDerived) {
  EXPECT_EQ(choice_seed(42, 0), 42u);
  EXPECT_NE(choice_seed(42, 1), 42u);
  EXPECT_NE(choice_seed(42, 1), choice_seed(42, 2));
}

}  // namespace
}  // namespace lathe
