// Prompt logprobs in the engine (vLLM's prompt_logprobs): the runner computes logits for the prompt rows
// of the chunks of choice 0 of a request that asks (only those chunks output more than their last row),
// each prompt token 1..T-1 is reported once however the prompt is chunked, beside other sequences'
// sampled rows, equal to the log-softmax of a plain forward; the engine hands them over with choice 0's
// first token, bypassing a warm prefix cache.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/serve/engine/engine.h"
#include "lathe/serve/engine/engine_test_util.h"
#include "lathe/serve/engine/model_runner.h"

namespace lathe {
namespace {

// f32 logits through paged vs dense attention: a few ulps of the logit sums, far below this.
constexpr double kTol = 1e-4;

std::shared_ptr<const SchedRequestParams> params(std::optional<int> prompt_logprobs) {
  SchedRequestParams p{.max_tokens = 8, .ignore_eos = true,
                       .sampling = {.temperature = 0.f, .max_tokens = 8, .ignore_eos = true, .seed = 0,
                                    .prompt_logprobs = prompt_logprobs}};
  return std::make_shared<const SchedRequestParams>(std::move(p));
}

TEST(PromptLogprobs, RunnerReportsEachPromptTokenOnceAcrossChunksBesideSampledRows) {
  const testing::EngineFixture f = testing::load_engine_fixture("llama");
  const std::vector<int32_t>& prompt = f.greedy_prompt;  // 5 tokens
  const std::vector<double> want = testing::dense_prompt_logprobs(*f.model, prompt);
  ModelRunner runner(*f.model, {.n_blocks = 6});
  constexpr uint64_t kA = 1, kB = 2, kC = 3;  // A asks (choice 0); B does not; C asks but is choice 1

  // Step 1: A's positions [0, 3) predict prompt tokens 1..3; nothing is sampled.
  SchedulerOutput s1{.step = 1, .num_scheduled_tokens = {{kA, 3}}, .total_num_scheduled_tokens = 3};
  s1.new_seqs.push_back({.seq_id = kA, .request_id = 1, .token_ids = prompt, .params = params(2), .block_ids = {1}});
  const ModelRunnerOutput o1 = runner.execute(s1);
  EXPECT_TRUE(o1.sampled.empty());
  ASSERT_EQ(o1.prompt_logprobs.at(kA).size(), 3u);
  // Step 2: B and C (whole prompts, new, so first in the batch) and A's last two positions: A's row 3
  // predicts token 4 and its row 4 is sampled; the sampled rows are not contiguous in the logits.
  SchedulerOutput s2{.step = 2, .num_scheduled_tokens = {{kA, 2}, {kB, 5}, {kC, 5}}, .total_num_scheduled_tokens = 12};
  s2.new_seqs.push_back({.seq_id = kB, .request_id = 2, .token_ids = prompt, .params = params(std::nullopt),
                         .block_ids = {2}});
  s2.new_seqs.push_back({.seq_id = kC, .request_id = 3, .index = 1, .token_ids = prompt, .params = params(2),
                         .block_ids = {3}});
  s2.cached_seqs.push_back({.seq_id = kA, .num_computed_tokens = 3});
  const ModelRunnerOutput o2 = runner.execute(s2);
  for (const uint64_t id : {kA, kB, kC}) EXPECT_EQ(o2.sampled.at(id), f.greedy_output[0]) << "seq " << id;
  ASSERT_EQ(o2.prompt_logprobs.size(), 1u);  // neither B (did not ask) nor C (choice 1)
  ASSERT_EQ(o2.prompt_logprobs.at(kA).size(), 1u);

  std::vector<SampledLogprobs> got = o1.prompt_logprobs.at(kA);
  got.push_back(o2.prompt_logprobs.at(kA)[0]);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i].logprob, want[i], kTol) << "prompt token " << i + 1;
    EXPECT_GE(got[i].rank, 1);
    ASSERT_GE(got[i].top.size(), 2u);  // the top 2, + the prompt token when not among them
    EXPECT_LE(got[i].top.size(), 3u);
    EXPECT_GE(got[i].top[0].logprob, got[i].top[1].logprob);
    EXPECT_EQ(got[i].rank == 1, got[i].top[0].token == prompt[i + 1]);
  }
  // Step 3: a decode reports no prompt logprobs.
  SchedulerOutput s3{.step = 3, .num_scheduled_tokens = {{kA, 1}}, .total_num_scheduled_tokens = 1};
  s3.cached_seqs.push_back({.seq_id = kA, .num_computed_tokens = 5});
  EXPECT_TRUE(runner.execute(s3).prompt_logprobs.empty());
}

TEST(PromptLogprobs, EngineSendsThemWithChoiceZerosFirstTokenPastAWarmPrefixCache) {
  const testing::EngineFixture f = testing::load_engine_fixture("llama");
  const std::vector<int32_t> prompt = testing::varied_prompts(6, 40, f.model->config().vocab_size, 3).back();
  ASSERT_GE(prompt.size(), 33u);  // two full blocks of 16 the cache can serve
  const std::vector<double> want = testing::dense_prompt_logprobs(*f.model, prompt);
  // Chunks of 8 tokens.
  Engine engine(*f.model, {.scheduler = {.max_num_batched_tokens = 24, .max_num_partial_prefills = 2,
                                         .long_prefill_token_threshold = 8}});
  testing::read_all(*engine.submit(testing::greedy_request(prompt, 2)).stream);  // warms the prefix cache
  EngineRequest r = testing::greedy_request(prompt, 3);
  r.sampling.n = 2;
  r.sampling.temperature = 1.f;
  r.sampling.seed = 4;
  r.sampling.prompt_logprobs = 0;
  const testing::Completion c = testing::read_all(*engine.submit(std::move(r)).stream);
  int with = 0;
  for (const EngineOutput& o : c.outputs) {
    if (!o.prompt_logprobs) continue;
    ++with;
    EXPECT_EQ(o.index, 0);
    ASSERT_TRUE(o.token);
    ASSERT_EQ(o.prompt_logprobs->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR((*o.prompt_logprobs)[i].logprob, want[i], kTol) << "prompt token " << i + 1;
      EXPECT_LE((*o.prompt_logprobs)[i].top.size(), 2u);  // k = 0: the token itself, or the top 0 + it
    }
  }
  EXPECT_EQ(with, 1);
  EXPECT_EQ(c.tokens.at(0).size(), 3u);
  EXPECT_EQ(c.tokens.at(1).size(), 3u);
  // A one-token prompt: an empty list, still sent.
  EngineRequest one = testing::greedy_request({prompt[0]}, 1);
  one.sampling.prompt_logprobs = 1;
  const testing::Completion c1 = testing::read_all(*engine.submit(std::move(one)).stream);
  ASSERT_TRUE(c1.outputs.at(0).prompt_logprobs);
  EXPECT_TRUE(c1.outputs.at(0).prompt_logprobs->empty());
}

}  // namespace
}  // namespace lathe
