// EngineRollout on the fixture policy (tests/fixtures/posttrain: Llama + PEFT adapter): G completions per prompt
// from one n = G request, each stamped with the weight version; the sampler's log-probs equal the trainer's
// log-probs of the same tokens under the live weights with the adapter on (temperature 1, no truncation: the
// processed distribution is the model's), also after the adapter moved (no stale prefix-cache block: the prompts
// span full blocks, which a second request of the same prompt would otherwise reuse); rewards
// from the caller's function; the same prompt numbers redraw the same completions; the memory plan's KV pool is
// the one the rollout's engine allocates.
#include "lathe/rollout/engine_rollout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/train/test_metrics.h"
#include "lathe/train/train_loop.h"
#include "lathe/posttrain/grpo_batch.h"
#include "lathe/posttrain/test_policy.h"
#include "lathe/models/paged_kv_store.h"
#include "lathe/serve/engine/engine_core.h"
#include "lathe/serve/kv_capacity.h"

namespace lathe::rollout {
namespace {

using posttrain::Trajectory;

std::vector<float> trainer_logps(const Model& m, const std::vector<Trajectory>& trs,
                                 const LogprobProcessing& processing = {}) {
  NoGradGuard ng;
  const posttrain::GrpoBatch b = posttrain::make_grpo_batch(trs);
  return m.token_logprobs(b.forward_batch(), Tensor::from_data_i32({b.n_tokens()}, b.targets), {}, false, processing)
      .logprobs.to_vector();
}

std::vector<float> rollout_logps(const std::vector<Trajectory>& trs) {
  std::vector<float> v;
  for (const Trajectory& t : trs) v.insert(v.end(), t.rollout_logps.begin(), t.rollout_logps.end());
  return v;
}

std::unique_ptr<EngineRollout> fixture_rollout(SamplingParams sampling = {},
                                               int64_t kv_cache_memory = int64_t{8} << 20) {
  const nlohmann::json ref = testing::posttrain_reference().at("grpo");
  // Prompts of 36 tokens: two full KV blocks of 16, which the prefix cache keeps and could serve again.
  const std::vector<int32_t> base = ref.at("prompt").get<std::vector<int32_t>>();
  std::vector<int32_t> p0;
  for (int k = 0; k < 6; ++k) p0.insert(p0.end(), base.begin(), base.end());
  std::vector<int32_t> p1(p0.rbegin(), p0.rend());
  // "even": 1 for an even completion length; "first": 1 on prompt 0 only, N/A on prompt 1.
  RewardFn rewards = [](int64_t prompt, std::span<const Trajectory> group) {
    std::vector<std::vector<double>> out;
    for (const Trajectory& t : group)
      out.push_back({t.completion.size() % 2 == 0 ? 1.0 : 0.0,
                     prompt == 0 ? 1.0 : std::numeric_limits<double>::quiet_NaN()});
    return out;
  };
  return std::make_unique<EngineRollout>(
      std::vector<std::vector<int32_t>>{p0, p1}, std::vector<std::string>{"even", "first"}, rewards,
      EngineRolloutOptions{
          .max_completion_length = 6, .sampling = sampling, .kv_cache_memory = kv_cache_memory, .seed = 5});
}

TEST(EngineRollout, MemoryPlanCountsTheKvPoolItsEngineAllocates) {
  testing::FixturePolicy p = testing::fixture_policy();
  const PagedKvStoreConfig kv = paged_kv_store_config(p.model->config(), 1);
  const int64_t block = kv_block_bytes({kv.n_layers, kv.n_heads, kv.n_kv_heads, kv.head_dim}, kDefaultKvBlockSize,
                                       DType::kF32);
  for (const int64_t budget : {int64_t{8} << 20, int64_t{3} << 20, int64_t{0}}) {  // 0: the engine's default
    const std::unique_ptr<EngineRollout> src = fixture_rollout({}, budget);
    const EngineCore engine(*p.model, rollout_engine_config({.max_completion_length = 6, .kv_cache_memory = budget},
                                                            src->max_prompt_tokens()));
    const int64_t bytes = src->memory_bytes(*p.model);
    EXPECT_EQ(bytes, (engine.stats().kv_blocks_total + 1) * block) << budget;  // + the null block
    if (budget > 0) {
      EXPECT_LE(bytes, budget);
      EXPECT_GT(bytes, budget - block);
    }
  }
}

TEST(EngineRollout, SamplesGroupsWithTheTrainersLogProbsOnLiveWeights) {
  testing::FixturePolicy p = testing::fixture_policy();
  const std::unique_ptr<EngineRollout> fixture_rollout_holder = fixture_rollout();
  EngineRollout& src = *fixture_rollout_holder;
  const std::vector<Trajectory> trs = src.generate(*p.model, 0, 2, 4);
  ASSERT_EQ(trs.size(), 8u);
  for (size_t i = 0; i < trs.size(); ++i) {
    const Trajectory& t = trs[i];
    EXPECT_EQ(t.prompt, trs[i < 4 ? 0 : 4].prompt);
    EXPECT_GE(t.completion.size(), 1u);
    EXPECT_LE(t.completion.size(), 6u);
    EXPECT_EQ(t.rollout_logps.size(), t.completion.size());
    EXPECT_EQ(t.truncated, t.completion.size() == 6u);  // the tiny model rarely samples its eos in 6 tokens
    EXPECT_EQ(t.weight_version, 0u);
    EXPECT_EQ(t.rewards[0], t.completion.size() % 2 == 0 ? 1.0 : 0.0);
    EXPECT_EQ(std::isnan(t.rewards[1]), i >= 4);
  }
  EXPECT_NE(trs[0].completion, trs[1].completion);  // G samples, not one
  // f32 forwards of the same weights over a KV store and over the packed batch: 1e-5 absolute.
  const std::vector<float> got = rollout_logps(trs), want = trainer_logps(*p.model, trs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  // The same prompt numbers redraw the same completions (seeded by prompt number).
  const std::vector<Trajectory> again = src.generate(*p.model, 0, 2, 4);
  for (size_t i = 0; i < trs.size(); ++i) EXPECT_EQ(again[i].completion, trs[i].completion) << i;

  // Move the adapter in place (an optimizer step) and bump the version: the next rollout reads the new weights.
  p.lora->for_each_param([](const std::string&, Tensor& t, int) {
    std::vector<float> v = t.to_vector();
    for (float& x : v) x *= 1.5f;
    t.copy_from(Tensor::from_data(t.shape(), v));
  });
  p.model->bump_weight_version();
  const std::vector<Trajectory> moved = src.generate(*p.model, 0, 2, 4);
  for (const Trajectory& t : moved) EXPECT_EQ(t.weight_version, 1u);
  const std::vector<float> got2 = rollout_logps(moved), want2 = trainer_logps(*p.model, moved);
  ASSERT_EQ(got2.size(), want2.size());
  for (size_t i = 0; i < got2.size(); ++i) EXPECT_NEAR(got2[i], want2[i], 1e-5) << i;
  // ... and those differ from the old weights' log-probs of the same tokens.
  double moved_by = 0;
  {
    p.lora->for_each_param([](const std::string&, Tensor& t, int) {
      std::vector<float> v = t.to_vector();
      for (float& x : v) x /= 1.5f;
      t.copy_from(Tensor::from_data(t.shape(), v));
    });
    const std::vector<float> old = trainer_logps(*p.model, moved);
    for (size_t i = 0; i < old.size(); ++i) moved_by = std::max(moved_by, static_cast<double>(std::fabs(old[i] - got2[i])));
  }
  EXPECT_GT(moved_by, 1e-3);
}

// With temperature, top-k and top-p the sampler's log-probs are of the processed distribution, and the trainer's
// replay of it (LogprobProcessing) gives the same numbers (f32 forwards: 1e-5), while the model's own
// distribution does not.
TEST(EngineRollout, TheTrainerReplaysTheSamplersTemperatureAndTruncation) {
  testing::FixturePolicy p = testing::fixture_policy();
  for (const LogprobProcessing pr : {LogprobProcessing{.temperature = 0.7f, .top_k = 20, .top_p = 0.9f},
                                     LogprobProcessing{.temperature = 1.3f, .top_p = 0.8f}}) {
    SamplingParams sp;
    sp.temperature = pr.temperature;
    sp.top_k = static_cast<int>(pr.top_k);
    sp.top_p = pr.top_p;
    const std::vector<Trajectory> trs = fixture_rollout(sp)->generate(*p.model, 0, 2, 4);
    const std::vector<float> got = rollout_logps(trs), want = trainer_logps(*p.model, trs, pr),
                             plain = trainer_logps(*p.model, trs);
    ASSERT_EQ(got.size(), want.size());
    double off = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5) << "T " << pr.temperature << " @" << i;
      off = std::max(off, static_cast<double>(std::fabs(got[i] - plain[i])));
    }
    EXPECT_GT(off, 1e-3);
  }
}

// GRPO on the shared TrainLoop with rollouts from the engine over the model the loop trains (LoRA on the fixture
// Llama): every step samples with the weights of the step before (lag 0, version = step − 1), the sampler and
// the trainer agree on every token's log-prob, and the mean reward (even completion lengths) is logged.
// With grpo.temperature / top_k / top_p the trainer replays the sampler's processing: the same agreement.
void feed_grpo_on_the_shared_loop(const std::string& temperature, const std::string& top_k, const std::string& top_p) {
  const std::string dir = testing::scratch_dir("grpo_engine_loop");
  train::TrainConfig c = train::parse_recipe(R"(
run: {seed: 1, threads: 2}
data: {train: unused.jsonl, batch_size: 8}
lora: {r: 4, lora_alpha: 8, target_modules: all-linear}
optimizer: {lr: 1.0e-2}
schedule: {kind: constant, steps: 3}
grpo: {num_generations: 4, max_completion_length: 6, beta: 0.0, loss_type: dapo}
)",
                                             {"run.dir=" + dir + "/run", "model.base=" + testing::fixtures_root() + "/models/llama",
                                              "grpo.temperature=" + temperature, "grpo.top_k=" + top_k, "grpo.top_p=" + top_p});
  posttrain::GrpoOptions o = posttrain::grpo_options(c);
  o.tokenizer.clear();  // the fixture model folder has none (the prompts are token ids)
  train::TrainLoop loop(c);
  Context ctx(2);
  ContextScope scope(ctx);
  SamplingParams sp;
  sp.temperature = static_cast<float>(o.temperature);
  sp.top_k = static_cast<int>(o.top_k);
  sp.top_p = static_cast<float>(o.top_p);
  posttrain::GrpoObjective objective(o, fixture_rollout(sp), 1);
  EXPECT_EQ(loop.run(objective, train::StartMode::kFresh, ctx).steps_done, 3);
  const std::string run = dir + "/run";
  for (double d : testing::step_metric(run, "sampler_trainer/logp_diff_max")) EXPECT_LT(d, 1e-4);
  for (double lag : testing::step_metric(run, "policy_version/lag")) EXPECT_EQ(lag, 0);
  EXPECT_EQ(testing::step_metric(run, "policy_version/min"), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(testing::step_metric(run, "rewards/even").size(), 3u);
  for (double w : testing::step_metric(run, "sampler_is/weight_mean")) EXPECT_NEAR(w, 1, 1e-4);  // mode none: 1
}

TEST(EngineRollout, FeedsGrpoOnTheSharedLoop) {
  feed_grpo_on_the_shared_loop("1.0", "0", "1.0");  // temperature, top_k, top_p
  feed_grpo_on_the_shared_loop("0.7", "20", "0.9");
}

}  // namespace
}  // namespace lathe::rollout
