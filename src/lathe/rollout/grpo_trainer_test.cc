// GrpoTrainer's recipe checks (grpo_trainer.h): per-entry reward weights become the advantage's weights, and
// giving weights both ways is an error naming both keys.
#include "lathe/rollout/grpo_trainer.h"

#include <gtest/gtest.h>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe::rollout {
namespace {

train::TrainConfig recipe(const std::string& grpo) {
  return train::parse_recipe("data: {train: unused.jsonl, batch_size: 8}\nschedule: {steps: 1}\ngrpo: " + grpo + "\n",
                             {"grpo.tokenizer=unused", "model.base=" + testing::fixtures_root() + "/models/llama"});
}

TEST(GrpoTrainer, RewardWeightsComeFromTheEntriesOrTheList) {
  const GrpoTrainer t(recipe(
      "{num_generations: 4, rewards: [{type: length, weight: 0.5}, {type: format, pattern: a, name: f}]}"));
  EXPECT_EQ(t.options().advantage.reward_weights, (std::vector<double>{0.5, 1.0}));
  const GrpoTrainer u(recipe("{num_generations: 4, reward_weights: [2, 3], rewards: [{type: length}, "
                             "{type: format, pattern: a}]}"));
  EXPECT_EQ(u.options().advantage.reward_weights, (std::vector<double>{2, 3}));
  try {
    GrpoTrainer both(recipe("{num_generations: 4, reward_weights: [2], rewards: [{type: length, weight: 1}]}"));
    ADD_FAILURE() << "weights given twice were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("grpo.reward_weights and a `weight`"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe::rollout
