// GrpoObjective on the fixture policy (tests/fixtures/posttrain "grpo") with a fixed rollout source: the
// fixture's loss and LoRA gradients through the objective (π_old = the sampler's log-probs), the on-policy
// shortcut (π_old = sg[π_θ]) against an explicit π_old forward, μ > 1 and steps_per_generation > 1 reusing one
// generation batch and its π_old, the reference pass skipped at β = 0, dapo's step normaliser, mismatch weights,
// policy versions, and the grpo: recipe section.
#include "lathe/posttrain/grpo_objective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/io/safetensors.h"
#include "lathe/posttrain/test_grads.h"
#include "lathe/posttrain/test_policy.h"
#include "lathe/train/test_metrics.h"
#include "lathe/train/train_loop.h"

namespace lathe::posttrain {
namespace {

using nlohmann::json;

// The fixture's group (its prompt, 4 completions, rewards, and its old log-probs as the sampler's), repeated for
// every prompt asked for; prompt p's rewards are the fixture's plus p (so groups differ).
class FixtureSource final : public RolloutSource {
 public:
  explicit FixtureSource(bool with_logps, float logp_shift = 0) {
    const json ref = testing::posttrain_reference().at("grpo");
    const SafetensorsFile st = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
    for (size_t i = 0; i < ref.at("completions").size(); ++i) {
      Trajectory t;
      t.prompt = ref.at("prompt").get<std::vector<int32_t>>();
      t.completion = ref.at("completions")[i].get<std::vector<int32_t>>();
      t.rewards = {ref.at("rewards")[i].get<double>()};
      if (with_logps) {
        t.rollout_logps = st.tensor("grpo.old_logps." + std::to_string(i)).to(DType::kF32).to_vector();
        for (size_t k = 0; k < t.rollout_logps.size(); ++k) t.rollout_logps[k] += logp_shift * ((k % 2) ? 1.f : -1.f);
      }
      group_.push_back(t);
    }
  }
  std::vector<std::string> reward_names() const override { return {"fixture"}; }
  int64_t max_prompt_tokens() const override { return static_cast<int64_t>(group_[0].prompt.size()); }
  std::vector<Trajectory> generate(const Model& policy, int64_t first_prompt, int64_t n_prompts,
                                   int64_t group_size) override {
    EXPECT_EQ(group_size, static_cast<int64_t>(group_.size()));
    calls->push_back(first_prompt);
    {  // the policy's log-prob of the best completion (reward 1), as it is when sampling
      NoGradGuard ng;
      const GrpoBatch b = make_grpo_batch(std::span<const Trajectory>(group_.data(), 1));
      const Tensor targets = Tensor::from_data_i32({b.n_tokens()}, b.targets);
      double s = 0;
      for (float x : policy.token_logprobs(b.forward_batch(), targets).logprobs.to_vector()) s += x;
      best_logp->push_back(s);
    }
    std::vector<Trajectory> out;
    for (int64_t p = first_prompt; p < first_prompt + n_prompts; ++p)
      for (Trajectory t : group_) {
        t.rewards[0] = odd_prompts_flat && p % 2 == 1 ? 1.0 : t.rewards[0] + static_cast<double>(p % 1000);
        t.weight_version = policy.weight_version();
        out.push_back(t);
      }
    return out;
  }
  bool odd_prompts_flat = false;  // odd prompt numbers: every completion gets reward 1 (no variance)
  std::shared_ptr<std::vector<int64_t>> calls = std::make_shared<std::vector<int64_t>>();
  std::shared_ptr<std::vector<double>> best_logp = std::make_shared<std::vector<double>>();
  std::vector<Trajectory> group_;
};

GrpoOptions fixture_options(const json& ref) {
  GrpoOptions o;
  o.num_generations = 4;
  o.max_completion_length = ref.at("max_completion_length").get<int64_t>();
  o.batch_size = 4;
  o.grad_accum = 1;
  o.steps_per_generation = 1;
  o.lora = true;
  o.loss = {.epsilon_low = ref.at("epsilon").get<double>(), .epsilon_high = ref.at("epsilon").get<double>(),
            .beta = ref.at("beta").get<double>(), .kl = GrpoKl::kK3, .aggregation = GrpoAggregation::kGrpo,
            .max_completion_length = o.max_completion_length};
  o.advantage = {.eps = 1e-4};
  return o;
}

struct ObjectiveRun {
  testing::FixturePolicy policy = testing::fixture_policy();
  std::unique_ptr<dist::Communicator> comm = dist::make_single_process();
  std::vector<std::string> notes;
  std::unique_ptr<GrpoObjective> objective;
  std::shared_ptr<std::vector<int64_t>> calls;
  ObjectiveRun(const GrpoOptions& o, std::unique_ptr<FixtureSource> src, ForwardOptions forward = {}) {
    calls = src->calls;
    objective = std::make_unique<GrpoObjective>(o, std::move(src), 1);
    objective->start({.model = *policy.model, .comm = *comm, .forward = forward,
                      .note = [this](const std::string& s) { notes.push_back(s); }});
  }
};

// The adapter's gradients by name (cleared).
testing::Grads lora_grads(LoraAdapters& lora) {
  testing::Grads g;
  lora.for_each_param([&](const std::string& name, Tensor& t, int) {
    g[name] = t.grad().to_vector();
    t.zero_grad();
  });
  return g;
}

// π_old of a micro-batch from an explicit no-grad forward of the model's weights as they are.
std::vector<float> explicit_logps(const Model& m, const GrpoMicroBatch& b) {
  NoGradGuard ng;
  return m.token_logprobs(b.batch.forward_batch(), Tensor::from_data_i32({b.batch.n_tokens()}, b.batch.targets))
      .logprobs.to_vector();
}

// Tolerances as grpo_loss_test (the same forwards).
TEST(GrpoObjective, MatchesTheFixtureWithTheSamplersLogProbsAsPiOld) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.use_rollout_logps = true;
  ObjectiveRun run(o, std::make_unique<FixtureSource>(true));
  const train::ObjectiveResult r = run.objective->next_loss(*run.policy.model);
  const double want = ref.at("loss_grpo").get<double>();
  EXPECT_NEAR(r.loss.item(), want, 2e-6 + 1e-5 * std::fabs(want));
  EXPECT_EQ(r.tokens, 3 + 5 + 4 + 6);
  double mean_reward = 0;
  for (const auto& x : ref.at("rewards")) mean_reward += x.get<double>() / 4;
  EXPECT_NEAR(testing::metric(r, "rewards/mean"), mean_reward, 1e-12);
  EXPECT_NEAR(testing::metric(r, "rewards/fixture"), mean_reward, 1e-12);
  EXPECT_NEAR(testing::metric(r, "sampler_trainer/logp_diff_mean"), 0, 1e-12);  // π_old is the sampler's
  EXPECT_EQ(run.objective->old_logp_forwards(), 0);
  EXPECT_EQ(run.objective->reference_forwards(), 1);
  EXPECT_EQ(r.metrics.size(), run.objective->metric_names().size());
  backward(r.loss);
  const SafetensorsFile st = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
  int checked = 0;
  run.policy.lora->for_each_param([&](const std::string& name, Tensor& t, int) {
    std::string peft = name;
    peft.insert(peft.rfind(".weight"), ".default");
    const testing::Grads got{{name, t.grad().to_vector()}};
    const testing::Grads want_g{{name, st.tensor("grpo.grad." + peft).to(DType::kF32).to_vector()}};
    EXPECT_LE(testing::grad_rel_diff(got, want_g), 1e-3) << name;
    ++checked;
  });
  EXPECT_EQ(checked, 28);
}

// On-policy (μ = 1, one step per generation batch, no sampler log-probs): no π_old forward, and the loss and
// gradient equal those with π_old taken from an explicit no-grad forward of the same weights. β = 0: no
// reference forward at all.
TEST(GrpoObjective, OnPolicySkipsThePiOldForwardAndBetaZeroTheReference) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.loss.beta = 0;
  ObjectiveRun run(o, std::make_unique<FixtureSource>(false));
  const GrpoMicroBatch b = run.objective->next_batch(*run.policy.model);
  EXPECT_TRUE(b.old_logps.empty());
  EXPECT_TRUE(b.ref_logps.empty());
  const train::ObjectiveResult r = run.objective->loss(*run.policy.model, b);
  EXPECT_EQ(run.objective->old_logp_forwards(), 0);
  EXPECT_EQ(run.objective->reference_forwards(), 0);
  EXPECT_NEAR(r.loss.item(), 0, 1e-6);  // ρ ≡ 1, grpo aggregation: −mean of the advantages (Σ A = 0)
  EXPECT_NEAR(testing::metric(r, "is_ratio/mean"), 1, 1e-12);
  backward(r.loss);
  const testing::Grads on_policy = lora_grads(*run.policy.lora);

  GrpoMicroBatch explicit_old = b;
  explicit_old.old_logps = explicit_logps(*run.policy.model, b);
  backward(run.objective->loss(*run.policy.model, explicit_old).loss);
  EXPECT_LE(testing::grad_rel_diff(on_policy, lora_grads(*run.policy.lora)), 1e-6);
  double norm = 0;
  for (const auto& [name, g] : on_policy)
    for (float x : g) norm += static_cast<double>(x) * x;
  EXPECT_GT(norm, 0);  // the policy gradient, though the loss is ~0
}

// μ = 2 passes over a generation batch of 2 micro-batches: one call to the source per 4 micro-batches, π_old
// computed once per chunk and reused after the weights moved; the second pass sees ratios ≠ 1 and a version lag.
TEST(GrpoObjective, IterationsAndStepsPerGenerationReuseOneGenerationBatch) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.num_iterations = 2;
  o.steps_per_generation = 2;
  ObjectiveRun run(o, std::make_unique<FixtureSource>(false));
  Model& m = *run.policy.model;
  std::vector<GrpoMicroBatch> seen;
  for (int i = 0; i < 4; ++i) {
    seen.push_back(run.objective->next_batch(m));
    const train::ObjectiveResult r = run.objective->loss(m, seen.back());
    if (i < 2) {
      EXPECT_NEAR(testing::metric(r, "is_ratio/mean"), 1, 1e-6) << i;
    } else {
      EXPECT_GT(std::fabs(testing::metric(r, "is_ratio/mean") - 1), 1e-6) << i;
    }
    EXPECT_DOUBLE_EQ(testing::metric(r, "policy_version/lag"), i >= 2 ? 1.0 : 0.0) << i;
    if (i == 1) {  // an "optimizer step": move the adapter, bump the version
      run.policy.lora->for_each_param([](const std::string&, Tensor& t, int) {
        std::vector<float> v = t.to_vector();
        for (float& x : v) x *= 1.1f;
        t.copy_from(Tensor::from_data(t.shape(), v));
      });
      m.bump_weight_version();
    }
  }
  EXPECT_EQ(*run.calls, std::vector<int64_t>{0});  // prompts 0 and 1, once
  EXPECT_EQ(run.objective->generations(), 1);
  EXPECT_EQ(run.objective->old_logp_forwards(), 2);  // not on-policy: one per chunk
  EXPECT_EQ(run.objective->reference_forwards(), 2);
  EXPECT_EQ(seen[2].old_logps, seen[0].old_logps);
  EXPECT_EQ(seen[3].old_logps, seen[1].old_logps);
  // The next cycle asks for the next prompts.
  run.objective->next_batch(m);
  EXPECT_EQ(*run.calls, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(run.objective->data_position(), 5 * 4);
}

// dapo: each micro-batch divides by the step's trained tokens over its micro-batches (grad_accum 2), so the mean
// over the step's micro-batches is Σ m ℓ / Σ m over the step; truncated completions drop out when masked.
TEST(GrpoObjective, DapoNormalisesByTheOptimizerStepsTokens) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.grad_accum = 2;
  o.steps_per_generation = 2;
  o.loss.aggregation = GrpoAggregation::kDapo;
  o.loss.mask_truncated_completions = true;
  auto src = std::make_unique<FixtureSource>(false);
  src->group_[3].truncated = true;  // 6 tokens masked
  ObjectiveRun run(o, std::move(src));
  const GrpoMicroBatch a = run.objective->next_batch(*run.policy.model);
  const GrpoMicroBatch b = run.objective->next_batch(*run.policy.model);
  EXPECT_DOUBLE_EQ(a.dapo_tokens, (12.0 + 12.0) / 2);
  EXPECT_DOUBLE_EQ(b.dapo_tokens, a.dapo_tokens);
  EXPECT_EQ(a.truncated, (std::vector<uint8_t>{0, 0, 0, 1}));
}

// Token TIS from sampler log-probs that differ from π_old: the weights and diagnostics of grpo_mismatch.
TEST(GrpoObjective, MismatchCorrectionWeightsAndDiagnostics) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.mismatch = {.mode = GrpoMismatchMode::kTokenTruncate, .c_max = 1.1};
  ObjectiveRun run(o, std::make_unique<FixtureSource>(true, 0.2f));
  const GrpoMicroBatch b = run.objective->next_batch(*run.policy.model);
  // On-policy: the training forward's log-probs are π_old, and the mismatch is computed from them in loss().
  EXPECT_TRUE(b.old_logps.empty());
  EXPECT_TRUE(b.is_weights.empty());
  std::vector<float> rollout;
  for (const Trajectory& t : b.trajectories) rollout.insert(rollout.end(), t.rollout_logps.begin(), t.rollout_logps.end());
  EXPECT_EQ(b.deferred_rollout_logps, rollout);
  // What it must equal: π_old from an explicit no-grad forward of the same weights, weights and diagnostics
  // from it.
  GrpoMicroBatch explicit_old = b;
  explicit_old.old_logps = explicit_logps(*run.policy.model, b);
  const GrpoMismatch want = grpo_mismatch(explicit_old.old_logps, rollout, b.mask, b.batch.offsets, o.mismatch);
  explicit_old.is_weights = want.weights;
  explicit_old.deferred_rollout_logps.clear();
  const train::ObjectiveResult r = run.objective->loss(*run.policy.model, b);
  EXPECT_NEAR(testing::metric(r, "sampler_is/weight_mean"), want.weight_mean, 1e-6);
  EXPECT_NEAR(testing::metric(r, "sampler_is/frac_clipped"), want.frac_clipped, 1e-9);
  EXPECT_GT(want.frac_clipped, 0);
  EXPECT_NEAR(testing::metric(r, "sampler_trainer/logp_diff_max"), want.logp_diff_max, 1e-6);
  EXPECT_EQ(run.objective->old_logp_forwards(), 0);  // no π_old forward
  backward(r.loss);
  const testing::Grads deferred = lora_grads(*run.policy.lora);
  const train::ObjectiveResult r_explicit = run.objective->loss(*run.policy.model, explicit_old);
  EXPECT_NEAR(r.loss.item(), r_explicit.loss.item(), 1e-6 + 1e-5 * std::fabs(r_explicit.loss.item()));
  backward(r_explicit.loss);
  EXPECT_LE(testing::grad_rel_diff(deferred, lora_grads(*run.policy.lora)), 1e-5);  // the weights are applied

  // With LoRA dropout the training forward is noisier than the sampler's: π_old gets its own forward.
  ObjectiveRun dropout(o, std::make_unique<FixtureSource>(true, 0.2f), ForwardOptions{.lora_dropout = true});
  const GrpoMicroBatch bd = dropout.objective->next_batch(*dropout.policy.model);
  EXPECT_EQ(dropout.objective->old_logp_forwards(), 1);
  EXPECT_TRUE(bd.deferred_rollout_logps.empty());
  EXPECT_EQ(bd.is_weights, want.weights);
}

TEST(GrpoObjective, RejectsBatchesThatSplitGroupsOrSteps) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.batch_size = 3;
  EXPECT_THROW(GrpoObjective(o, std::make_unique<FixtureSource>(false), 1), InvalidArgument);
  o = fixture_options(ref);
  o.grad_accum = 2;
  o.steps_per_generation = 3;
  EXPECT_THROW(GrpoObjective(o, std::make_unique<FixtureSource>(false), 1), InvalidArgument);
  o = fixture_options(ref);
  o.advantage.reward_weights = {1.0, 2.0};
  EXPECT_THROW(GrpoObjective(o, std::make_unique<FixtureSource>(false), 1), InvalidArgument);
}

// The objective on the shared TrainLoop: LoRA on the fixture Llama (B = 0 at the start: the policy is the
// reference), on-policy, β 0.04. Every step logs the §5.7 metrics, trains on completions sampled by the weights
// it updates (lag 0), the KL to the reference grows from 0, and the best completion's log-prob rises.
TEST(GrpoObjective, TrainsOnTheSharedLoop) {
  const std::string dir = testing::scratch_dir("grpo_loop");
  train::TrainConfig c = train::parse_recipe(R"(
run: {seed: 1, threads: 2}
data: {train: unused.jsonl, batch_size: 4}
lora: {r: 4, lora_alpha: 8, target_modules: all-linear}
optimizer: {lr: 2.0e-2}
schedule: {kind: constant, steps: 6}
grpo: {num_generations: 4, max_completion_length: 8, beta: 0.04, loss_type: grpo}
)",
                                             {"run.dir=" + dir + "/run", "model.base=" + testing::fixtures_root() + "/models/llama"});
  GrpoOptions o = grpo_options(c);
  o.tokenizer.clear();  // the fixture model folder has none (the trajectories are token ids)
  auto src = std::make_unique<FixtureSource>(false);
  const std::shared_ptr<std::vector<double>> best = src->best_logp;
  train::TrainLoop loop(c);
  Context ctx(2);
  ContextScope scope(ctx);
  GrpoObjective objective(o, std::move(src), 1);
  const train::TrainResult r = loop.run(objective, train::StartMode::kFresh, ctx);
  EXPECT_EQ(r.steps_done, 6);
  ASSERT_EQ(best->size(), 6u);  // one generation batch per step
  EXPECT_GT(best->back(), best->front() + 0.1);
  const std::vector<double> kl = testing::step_metric(dir + "/run", "kl");
  ASSERT_EQ(kl.size(), 6u);
  EXPECT_NEAR(kl.front(), 0, 1e-9);
  EXPECT_GT(kl.back(), 1e-4);
  for (const std::string& key : objective.metric_names()) {
    if (key.rfind("sampler_", 0) == 0) continue;  // no sampler log-probs: null
    EXPECT_EQ(testing::step_metric(dir + "/run", key).size(), 6u) << key;
  }
  for (double lag : testing::step_metric(dir + "/run", "policy_version/lag")) EXPECT_EQ(lag, 0);
  const std::vector<double> version = testing::step_metric(dir + "/run", "policy_version/min");
  EXPECT_EQ(version.back(), 5);  // sampled by the weights after 5 optimizer steps
}

// ---- The grpo: recipe section ----

train::TrainConfig grpo_recipe(const std::string& grpo, const std::vector<std::string>& overrides = {}) {
  return train::parse_recipe(R"(
model: {base: some/model}
data: {train: prompts.jsonl, batch_size: 8, grad_accum: 2}
optimizer: {lr: 1.0e-6}
schedule: {steps: 10}
grpo: )" + grpo + "\n",
                             overrides);
}

// DAPO dynamic sampling: of prompts 0 and 1, prompt 1's group has one reward (dropped) and is refilled from a
// prompt numbered apart (2^40, even: it varies); the micro-batch trains prompts 0 and 2^40, and the metrics count
// one dropped group and one extra round. Without rounds the dropped group is put back.
TEST(GrpoObjective, DynamicSamplingRefillsGroupsWithoutVariance) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o = fixture_options(ref);
  o.batch_size = 8;
  o.dynamic_sampling = true;
  for (int64_t rounds : {2, 0}) {
    o.max_resample_rounds = rounds;
    auto src = std::make_unique<FixtureSource>(false);
    src->odd_prompts_flat = true;
    ObjectiveRun run(o, std::move(src));
    const GrpoMicroBatch b = run.objective->next_batch(*run.policy.model);
    const train::ObjectiveResult r = run.objective->loss(*run.policy.model, b);
    const int64_t refill = int64_t{1} << 40;
    EXPECT_EQ(*run.calls, rounds > 0 ? (std::vector<int64_t>{0, refill}) : (std::vector<int64_t>{0})) << rounds;
    ASSERT_EQ(b.trajectories.size(), 8u);
    double zero = 0;
    for (size_t i = 4; i < 8; ++i) zero += std::fabs(b.advantages[i]);
    if (rounds > 0)
      EXPECT_GT(zero, 0) << "the refilled group has signal";
    else
      EXPECT_EQ(zero, 0) << "the put-back group has none";
    EXPECT_EQ(testing::metric(r, "dynamic_sampling/dropped_groups"), 1);
    EXPECT_EQ(testing::metric(r, "dynamic_sampling/refill_rounds"), rounds > 0 ? 1 : 0);
    EXPECT_EQ(testing::metric(r, "dynamic_sampling/kept_zero_std_groups"), rounds > 0 ? 0 : 1);
    EXPECT_GE(testing::metric(r, "time/rollout_s"), 0);
  }
}

TEST(GrpoOptions, DefaultsAreTrlsAndWrittenIntoTheResolvedRecipe) {
  train::TrainConfig c = grpo_recipe("{}");
  const GrpoOptions o = grpo_options(c);
  EXPECT_EQ(o.num_generations, 8);
  EXPECT_EQ(o.steps_per_generation, 2);  // = grad_accum
  EXPECT_EQ(o.loss.aggregation, GrpoAggregation::kDapo);
  EXPECT_EQ(o.loss.kl, GrpoKl::kK3);
  EXPECT_EQ(o.loss.beta, 0);
  EXPECT_EQ(o.loss.epsilon_high, 0.2);
  EXPECT_EQ(o.advantage.eps, 1e-4);
  EXPECT_TRUE(o.on_policy());
  const json& s = c.resolved.at("grpo");
  EXPECT_EQ(s.at("loss_type"), "dapo");
  EXPECT_EQ(s.at("scale_rewards"), "group");
  EXPECT_EQ(s.at("importance_sampling_correction"), "none");
  EXPECT_EQ(s.at("max_completion_length"), 512);
  EXPECT_EQ(s.at("dynamic_sampling"), false);
  EXPECT_EQ(s.at("max_resample_rounds"), 3);

  train::TrainConfig d = grpo_recipe(
      "{num_generations: 4, epsilon: 0.2, epsilon_high: 0.28, loss_type: grpo, beta: 0.04, kl_estimator: k1,"
      " importance_sampling_level: sequence, reward_weights: [1.0, 0.5], importance_sampling_correction: sequence_mask,"
      " importance_sampling_sequence: mean, num_iterations: 2}");
  const GrpoOptions p = grpo_options(d);
  EXPECT_EQ(p.loss.epsilon_high, 0.28);
  EXPECT_EQ(p.loss.ratio_level, GrpoRatioLevel::kSequence);
  EXPECT_EQ(p.advantage.reward_weights, (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(p.mismatch.mode, GrpoMismatchMode::kSequenceMask);
  EXPECT_TRUE(p.mismatch.sequence_mean);
  EXPECT_FALSE(p.on_policy());
}

TEST(GrpoOptions, BadValuesAreErrorsNamingTheKey) {
  const auto error_of = [](const std::string& grpo, const std::vector<std::string>& overrides = {}) -> std::string {
    try {
      train::TrainConfig c = grpo_recipe(grpo, overrides);
      grpo_options(c);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("{loss_type: mean}").find("grpo.loss_type"), std::string::npos);
  EXPECT_NE(error_of("{kl_estimator: k4}").find("grpo.kl_estimator"), std::string::npos);
  EXPECT_NE(error_of("{epsilon_c: 1.0}").find("grpo.epsilon_c"), std::string::npos);
  EXPECT_NE(error_of("{num_generations: 1}").find("grpo.num_generations"), std::string::npos);
  EXPECT_NE(error_of("{num_generations: 3}").find("grpo.steps_per_generation"), std::string::npos);
  EXPECT_NE(error_of("{epsilon: 0.2, typo: 1}").find("unknown key grpo.typo"), std::string::npos);
  EXPECT_NE(error_of("{importance_sampling_cap: 0}").find("grpo.importance_sampling_cap"), std::string::npos);
  EXPECT_NE(error_of("{overlong_buffer: 600}").find("grpo.overlong_buffer"), std::string::npos);
  EXPECT_NE(error_of("{reward_weights: [a]}").find("grpo.reward_weights"), std::string::npos);
  EXPECT_NE(error_of("{temperature: -1}").find("grpo.temperature"), std::string::npos);
  EXPECT_NE(error_of("{top_p: 0}").find("grpo.top_p"), std::string::npos);
  EXPECT_NE(error_of("{max_resample_rounds: -1}").find("grpo.max_resample_rounds"), std::string::npos);
  EXPECT_NE(error_of("{dynamic_sampling: 2}").find("grpo.dynamic_sampling"), std::string::npos);
  EXPECT_NE(error_of("{rewards: []}").find("grpo.rewards"), std::string::npos);
  EXPECT_NE(error_of("{}", {"data.seq_len=128"}).find("grpo.max_completion_length"), std::string::npos);
  train::TrainConfig no_base = grpo_recipe("{beta: 0.04}");
  no_base.model_base.clear();
  EXPECT_THROW(grpo_options(no_base), InvalidArgument);  // β > 0 and no reference to load
}

}  // namespace
}  // namespace lathe::posttrain
