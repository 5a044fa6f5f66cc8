// Built-in reward functions of `lathe grpo` (the recipe's grpo.rewards list; docs/recipes.md), on the decoded
// completion text (special tokens skipped):
//   format          1 when the regex `pattern` (ECMAScript) matches somewhere in the completion, else 0
//   answer_exact    the text `pattern` captures (its first group; no pattern: the whole completion), trimmed,
//                   equals the row's answer column, trimmed: 1, else 0
//   answer_numeric  the number `pattern` captures (no pattern: the completion's last number) is within
//                   `tolerance` of the row's numeric answer: 1, else 0 (no number: 0)
// Each entry has a `name` (rewards/<name> in the metrics; default its type). The answer rewards are "not
// applicable" (NaN, specs §5.1) on a row without an answer, so mixed datasets need no dummy answers.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::rollout {

enum class RewardKind : uint8_t { kFormat, kAnswerExact, kAnswerNumeric, kCount };

struct RewardSpec {
  RewardKind kind = RewardKind::kFormat;
  std::string name;
  std::string pattern;            // "" allowed for the answer rewards
  std::optional<std::regex> re;   // compiled pattern
  double tolerance = 1e-6;        // answer_numeric: |x − answer| <= tolerance · max(1, |answer|)
};

// From grpo.rewards (a list of mappings {type, name?, pattern?, tolerance?}); InvalidArgument
// "<where>: grpo.rewards[i].<key> = ...: <rule>" for a bad entry (unknown type or key, a regex that does not
// compile, a format reward without a pattern, two rewards of one name).
std::vector<RewardSpec> parse_reward_specs(const nlohmann::json& list, const std::string& where);

// One reward on one completion text; `answer` is the row's answer column (null: none).
double reward_value(const RewardSpec& r, const std::string& completion, const nlohmann::json& answer);

}  // namespace lathe::rollout
