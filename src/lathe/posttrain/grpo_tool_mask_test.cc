// The GRPO objective trains only the tokens a trajectory's loss mask marks (multi-turn episodes: the model's
// tokens 1, the environment's observations 0; rollout/episode_rollout.h). On the fixture group (tests/fixtures/
// posttrain "grpo") with tool output appended to every completion under mask 0: the loss and the LoRA gradients
// are the fixture's (the appended tokens and their sampler log-probs change nothing, whatever they are), under
// the grpo and the dapo aggregations (whose token count is the trained tokens'); with mask 1 they do change.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/dist/communicator.h"
#include "lathe/io/safetensors.h"
#include "lathe/posttrain/grpo_objective.h"
#include "lathe/posttrain/test_grads.h"
#include "lathe/posttrain/test_policy.h"

namespace lathe::posttrain {
namespace {

using nlohmann::json;

// The fixture's group, each completion followed by `tool` (sampler log-prob `tool_logp` each) under `tool_mask`.
class ToolOutputSource final : public RolloutSource {
 public:
  ToolOutputSource(std::vector<int32_t> tool, float tool_logp, uint8_t tool_mask) {
    const json ref = testing::posttrain_reference().at("grpo");
    const SafetensorsFile st = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
    for (size_t i = 0; i < ref.at("completions").size(); ++i) {
      Trajectory t;
      t.prompt = ref.at("prompt").get<std::vector<int32_t>>();
      t.completion = ref.at("completions")[i].get<std::vector<int32_t>>();
      t.rollout_logps = st.tensor("grpo.old_logps." + std::to_string(i)).to(DType::kF32).to_vector();
      t.loss_mask.assign(t.completion.size(), 1);
      t.completion.insert(t.completion.end(), tool.begin(), tool.end());
      t.rollout_logps.insert(t.rollout_logps.end(), tool.size(), tool_logp);
      t.loss_mask.insert(t.loss_mask.end(), tool.size(), tool_mask);
      t.rewards = {ref.at("rewards")[i].get<double>()};
      group_.push_back(t);
    }
  }
  std::vector<std::string> reward_names() const override { return {"fixture"}; }
  int64_t max_prompt_tokens() const override { return static_cast<int64_t>(group_[0].prompt.size()); }
  std::vector<Trajectory> generate(const Model& policy, int64_t, int64_t n_prompts, int64_t) override {
    std::vector<Trajectory> out;
    for (int64_t p = 0; p < n_prompts; ++p)
      for (Trajectory t : group_) {
        t.weight_version = policy.weight_version();
        out.push_back(t);
      }
    return out;
  }

 private:
  std::vector<Trajectory> group_;
};

struct LossAndGrads {
  double loss = 0;
  testing::Grads grads;
};

// One micro-batch of the fixture group through the objective (π_old: the sampler's log-probs), backward.
LossAndGrads run(const std::vector<int32_t>& tool, float tool_logp, uint8_t tool_mask, GrpoAggregation agg) {
  const json ref = testing::posttrain_reference().at("grpo");
  GrpoOptions o;
  o.num_generations = 4;
  o.max_completion_length = ref.at("max_completion_length").get<int64_t>() + static_cast<int64_t>(tool.size());
  o.batch_size = 4;
  o.steps_per_generation = 1;
  o.lora = true;
  o.use_rollout_logps = true;
  o.loss = {.epsilon_low = ref.at("epsilon").get<double>(), .epsilon_high = ref.at("epsilon").get<double>(),
            .beta = ref.at("beta").get<double>(), .kl = GrpoKl::kK3, .aggregation = agg,
            .max_completion_length = o.max_completion_length};
  o.advantage = {.eps = 1e-4};
  testing::FixturePolicy policy = testing::fixture_policy();
  std::unique_ptr<dist::Communicator> comm = dist::make_single_process();
  GrpoObjective objective(o, std::make_unique<ToolOutputSource>(tool, tool_logp, tool_mask), 1);
  objective.start({.model = *policy.model, .comm = *comm, .forward = {}, .note = [](const std::string&) {}});
  const train::ObjectiveResult r = objective.next_loss(*policy.model);
  LossAndGrads out{.loss = r.loss.item()};
  backward(r.loss);
  policy.lora->for_each_param([&](const std::string& name, Tensor& t, int) { out.grads[name] = t.grad().to_vector(); });
  return out;
}

TEST(GrpoToolMask, ObservationTokensUnderMaskZeroChangeNeitherLossNorGradient) {
  const json ref = testing::posttrain_reference().at("grpo");
  const LossAndGrads plain = run({}, 0, 0, GrpoAggregation::kGrpo);
  const double want = ref.at("loss_grpo").get<double>();
  EXPECT_NEAR(plain.loss, want, 2e-6 + 1e-5 * std::fabs(want));  // tolerance as grpo_objective_test

  // Tool output after each completion, twice with other tokens and other sampler log-probs.
  const LossAndGrads a = run({7, 8, 9}, -1.f, 0, GrpoAggregation::kGrpo);
  const LossAndGrads b = run({100, 3, 250}, -6.f, 0, GrpoAggregation::kGrpo);
  // Causal attention: the completion tokens' log-probs do not see the tokens after them, so up to the f32
  // rounding of a longer packed batch the loss and gradient are the plain fixture's.
  EXPECT_NEAR(a.loss, plain.loss, 1e-6 * (1 + std::fabs(plain.loss)));
  EXPECT_NEAR(b.loss, plain.loss, 1e-6 * (1 + std::fabs(plain.loss)));
  EXPECT_LE(testing::grad_rel_diff(a.grads, plain.grads), 1e-5);
  EXPECT_LE(testing::grad_rel_diff(b.grads, a.grads), 1e-5);

  // dapo divides by the step's trained tokens: the masked ones are not counted.
  const LossAndGrads dapo_plain = run({}, 0, 0, GrpoAggregation::kDapo);
  const LossAndGrads dapo_tool = run({100, 3, 250}, -6.f, 0, GrpoAggregation::kDapo);
  EXPECT_NEAR(dapo_tool.loss, dapo_plain.loss, 1e-6 * (1 + std::fabs(dapo_plain.loss)));
  EXPECT_LE(testing::grad_rel_diff(dapo_tool.grads, dapo_plain.grads), 1e-5);

  // The same tokens trained (mask 1) do change both: the test can tell.
  const LossAndGrads trained = run({100, 3, 250}, -6.f, 1, GrpoAggregation::kGrpo);
  EXPECT_GT(std::fabs(trained.loss - plain.loss), 1e-4);
  EXPECT_GT(testing::grad_rel_diff(trained.grads, plain.grads), 1e-3);
}

TEST(GrpoToolMask, LossMaskOfTheWrongLengthIsRefused) {
  Trajectory t;
  t.prompt = {1, 2};
  t.completion = {3, 4, 5};
  t.loss_mask = {1, 0};
  EXPECT_THROW(make_grpo_batch(std::span<const Trajectory>(&t, 1)), InvalidArgument);
  t.loss_mask = {1, 0, 1};
  EXPECT_EQ(make_grpo_batch(std::span<const Trajectory>(&t, 1)).loss_mask, (std::vector<uint8_t>{1, 0, 1}));
}

}  // namespace
}  // namespace lathe::posttrain
