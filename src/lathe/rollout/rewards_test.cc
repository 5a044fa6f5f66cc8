// The built-in rewards of `lathe grpo` (rewards.h): each type on hand-written completions, "not applicable"
// without an answer, and every bad grpo.rewards entry refused by its key.
#include "lathe/rollout/rewards.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/base/error.h"

namespace lathe::rollout {
namespace {

using nlohmann::json;

RewardSpec one(const json& entry) { return parse_reward_specs(json::array({entry}), "r.yaml", 100)[0]; }

// One completion of a row whose `answer` column is `answer` (null: the row has none).
double value(const RewardSpec& r, const std::string& completion, const json& answer) {
  nlohmann::ordered_json row = nlohmann::ordered_json::object();
  if (!answer.is_null()) row["answer"] = answer;
  return reward_value(r, {.completion = completion, .completion_tokens = 1, .max_completion_tokens = 100, .columns = &row});
}

TEST(GrpoRewards, EachTypeScoresItsDefinition) {
  const RewardSpec fmt = one({{"type", "format"}, {"pattern", "^<think>.*</think>"}});
  EXPECT_EQ(fmt.name, "format");
  EXPECT_EQ(value(fmt, "<think>hm</think> 4", nullptr), 1.0);
  EXPECT_EQ(value(fmt, "4 <think>hm</think>", nullptr), 0.0);

  const RewardSpec exact = one({{"type", "answer_exact"}, {"name", "ans"}, {"pattern", "<answer>(.*)</answer>"}});
  EXPECT_EQ(exact.name, "ans");
  EXPECT_EQ(value(exact, "so <answer> Paris </answer>", "Paris"), 1.0);
  EXPECT_EQ(value(exact, "so <answer>Lyon</answer>", "Paris"), 0.0);
  EXPECT_EQ(value(exact, "Paris", "Paris"), 0.0);  // the pattern does not match
  EXPECT_TRUE(std::isnan(value(exact, "<answer>Paris</answer>", nullptr)));  // no answer: N/A
  EXPECT_EQ(value(one({{"type", "answer_exact"}}), "  Paris\n", "Paris"), 1.0);  // whole completion

  const RewardSpec num = one({{"type", "answer_numeric"}, {"tolerance", 0.01}});
  EXPECT_EQ(value(num, "first 12, then 1,400 kcal", 1400), 1.0);  // the last number, separators dropped
  EXPECT_EQ(value(num, "142 kcal", "140"), 0.0);                  // 2 > 0.01 · 140
  EXPECT_EQ(value(num, "140.5 kcal", "about 141"), 1.0);          // within 1.41
  EXPECT_EQ(value(num, "no number", 3), 0.0);
  EXPECT_TRUE(std::isnan(value(num, "3", nullptr)));
  EXPECT_EQ(value(num, "-2.5e1 degrees", -25), 1.0);
}

TEST(GrpoRewards, BadEntriesAreErrorsNamingTheKey) {
  const auto error_of = [](const json& list) -> std::string {
    try {
      parse_reward_specs(list, "r.yaml", 100);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(json::array()).find("grpo.rewards"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "lenght"}}})).find("grpo.rewards[0].type"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "length"}, {"target", 100}}})).find(".target"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "length"}, {"pattern", "a"}}})).find("unknown key pattern"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "command"}}})).find(".command"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "command"}, {"command", json::array({"sh", 1})}}})).find(".command"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "command"}, {"command", {"sh"}}, {"timeout", 0}}})).find(".timeout"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}, {"pattern", "a"}, {"weight", "x"}}})).find(".weight"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "answer_exact"}, {"column", ""}}})).find(".column"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}}})).find("grpo.rewards[0].pattern"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}, {"pattern", "("}}})).find("not a regex"), std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "format"}, {"pattern", "a"}, {"tolerance", 1}}})).find("unknown key tolerance"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "answer_exact"}, {"weights", 1}}})).find("unknown key weights"),
            std::string::npos);
  EXPECT_NE(error_of(json::array({{{"type", "answer_exact"}}, {{"type", "answer_exact"}}})).find("two rewards"),
            std::string::npos);
}

// length: −max(0, |y| − target) / (L_max − target), in tokens, capped at −1.
TEST(GrpoRewards, LengthPenalisesTokensPastTheTarget) {
  const RewardSpec all = one({{"type", "length"}}), past = one({{"type", "length"}, {"name", "long"}, {"target", 20}});
  const auto at = [](const RewardSpec& r, int64_t tokens) {
    return reward_value(r, {.completion = "x", .completion_tokens = tokens, .max_completion_tokens = 100});
  };
  EXPECT_EQ(at(all, 0), 0.0);
  EXPECT_DOUBLE_EQ(at(all, 25), -0.25);
  EXPECT_DOUBLE_EQ(at(all, 100), -1.0);
  EXPECT_EQ(at(past, 20), 0.0);
  EXPECT_DOUBLE_EQ(at(past, 60), -0.5);
  EXPECT_DOUBLE_EQ(at(past, 120), -1.0);  // past L_max (cannot be sampled, but stays in range)
}

// The answer rewards read the column their entry names; a row without it is N/A.
TEST(GrpoRewards, AnswerRewardsReadTheirColumn) {
  const RewardSpec r = one({{"type", "answer_numeric"}, {"column", "kcal"}});
  nlohmann::ordered_json row = {{"answer", 1}, {"kcal", 250}};
  EXPECT_EQ(reward_value(r, {.completion = "about 250", .columns = &row}), 1.0);
  EXPECT_EQ(reward_value(r, {.completion = "about 1", .columns = &row}), 0.0);
  row.erase("kcal");
  EXPECT_TRUE(std::isnan(reward_value(r, {.completion = "about 250", .columns = &row})));
}

}  // namespace
}  // namespace lathe::rollout
