// The built-in rewards of `lathe grpo` (rewards.h): each type on hand-written completions, "not applicable"
// without an answer, and every bad grpo.rewards entry refused by its key.
#include "lathe/rollout/rewards.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/base/error.h"

namespace lathe::rollout {
namespace {

using nlohmann::json;

RewardSpec one(const json& entry) { return parse_reward_specs(json::array({entry}), "r.yaml")[0]; }

TEST(GrpoRewards, EachTypeScoresItsDefinition) {
  const RewardSpec fmt = one({{"type", "format"}, {"pattern", "^<think>.*</think>"}});
  EXPECT_EQ(fmt.name, "format");
  EXPECT_EQ(reward_value(fmt, "<think>hm</think> 4", nullptr), 1.0);
  EXPECT_EQ(reward_value(fmt, "4 <think>hm</think>", nullptr), 0.0);

  const RewardSpec exact = one({{"type", "answer_exact"}, {"name", "ans"}, {"pattern", "<answer>(.*)</answer>"}});
  EXPECT_EQ(exact.name, "ans");
  EXPECT_EQ(reward_value(exact, "so <answer> Paris </answer>", "Paris"), 1.0);
  EXPECT_EQ(reward_value(exact, "so <answer>Lyon</answer>", "Paris"), 0.0);
  EXPECT_EQ(reward_value(exact, "Paris", "Paris"), 0.0);  // the pattern does not match
  EXPECT_TRUE(std::isnan(reward_value(exact, "<answer>Paris</answer>", nullptr)));  // no answer: N/A
  EXPECT_EQ(reward_value(one({{"type", "answer_exact"}}), "  Paris\n", "Paris"), 1.0);  // whole completion

  const RewardSpec num = one({{"type", "answer_numeric"}, {"tolerance", 0.01}});
  EXPECT_EQ(reward_value(num, "first 12, then 1,400 kcal", 1400), 1.0);  // the last number, separators dropped
  EXPECT_EQ(reward_value(num, "142 kcal", "140"), 0.0);                  // 2 > 0.01 · 140
  EXPECT_EQ(reward_value(num, "140.5 kcal", "about 141"), 1.0);          // within 1.41
  EXPECT_EQ(reward_value(num, "no number", 3), 0.0);
  EXPECT_TRUE(std::isnan(reward_value(num, "3", nullptr)));
  EXPECT_EQ(reward_value(num, "-2.5e1 degrees", -25), 1.0);
}

TEST(GrpoRewards, BadEntriesAreErrorsNamingTheKey) {
  const auto error_of = [](const json& list) -> std::string {
    try {
      parse_reward_specs(list, "r.yaml");
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(json::array()).find("grpo.rewards"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "length"}}})).find("grpo.rewards[0].type"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}}})).find("grpo.rewards[0].pattern"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}, {"pattern", "("}}})).find("not a regex"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}, {"pattern", "a"}, {"tolerance", 1}}})).find(".tolerance"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "answer_exact"}, {"weight", 1}}})).find("unknown key weight"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "answer_exact"}}, {{"type", "answer_exact"}}})).find("two rewards"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe::rollout
