// Built-in reward functions of `lathe grpo` (the recipe's grpo.rewards list; docs/recipes.md), on the decoded
// completion text (special tokens skipped):
//   format          1 when the regex `pattern` (ECMAScript) matches somewhere in the completion, else 0
//   answer_exact    the text `pattern` captures (its first group; no pattern: the whole completion), trimmed,
//                   equals the row's `column` (default answer), trimmed: 1, else 0
//   answer_numeric  the number `pattern` captures (no pattern: the completion's last number) is within
//                   `tolerance` of the row's numeric `column`: 1, else 0 (no number: 0)
//   tool_call       the completion makes the tool calls of the row's `column` (default tool_call): name and
//                   expected arguments, read by the serving parser for `parser` (default hermes;
//                   tool_call_match.h): 1 for an exact match, else 0, or with `partial: true` the fraction of
//                   checks passed
//   length          a length penalty in completion tokens: −max(0, |y| − target) / (L_max − target), in [−1, 0]
//                   (L_max = grpo.max_completion_length; target default 0)
//   command         an external program scoring over JSON Lines (command_reward.h; scored by RewardSet)
// Each entry has a `name` (rewards/<name> in the metrics; default its type) and an optional `weight` (the total
// reward is the weighted sum; rewards/<name> stay unweighted). The answer rewards are "not applicable" (NaN,
// specs §5.1) on a row without that column (so is tool_call), so mixed datasets need no dummy answers.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lathe/serve/frontend/tool_call_parser.h"

namespace lathe::rollout {

enum class RewardKind : uint8_t { kFormat, kAnswerExact, kAnswerNumeric, kToolCall, kLength, kCommand, kCount };

struct RewardSpec {
  RewardKind kind = RewardKind::kFormat;
  std::string name;
  std::string pattern;            // "" allowed for the answer rewards
  std::optional<std::regex> re;   // compiled pattern
  double tolerance = 1e-6;        // answer_numeric: |x − answer| <= tolerance · max(1, |answer|)
  std::string column = "answer";  // answer and tool_call rewards: the dataset column holding the answer (tool_call:
                                  // default "tool_call")
  serve::ToolCallFormat tool_call_format = serve::ToolCallFormat::kHermes;  // tool_call: the call syntax
  bool partial = false;           // tool_call: the fraction of checks passed instead of 0 / 1
  std::optional<double> weight;   // its weight in the total reward (unset: 1, or grpo.reward_weights)
  int64_t target = 0;             // length: completions up to this many tokens are not penalised
  std::vector<std::string> command;  // command: argv
  double timeout = 60;               // command: seconds to wait for one answer
};

// What a reward function sees of one completion.
struct RewardInput {
  std::string prompt;                   // the prompt as rendered (chat template applied)
  std::string completion;               // decoded, special tokens skipped
  std::string completion_raw;           // decoded with special tokens kept (tool_call: some families' call markers
                                        // are special tokens); empty: use `completion`
  int64_t completion_tokens = 0;        // |y|
  int64_t max_completion_tokens = 0;    // grpo.max_completion_length
  const nlohmann::ordered_json* columns = nullptr;  // the row's other dataset columns (an object), or null
};

// From grpo.rewards (a list of mappings {type, name?, weight?, ...}); InvalidArgument
// "<where>: grpo.rewards[i].<key> = ...: <rule>" for a bad entry (unknown type or key, a key of another type, a
// regex that does not compile, a format reward without a pattern, two rewards of one name). max_completion_length
// bounds a length reward's target.
std::vector<RewardSpec> parse_reward_specs(const nlohmann::json& list, const std::string& where,
                                           int64_t max_completion_length);

// [F] the entries' `weight`s (1 where unset), or empty when no entry has one (every function weighs 1).
std::vector<double> reward_weights(const std::vector<RewardSpec>& specs);

// One stateless reward (every kind but command) on one completion.
double reward_value(const RewardSpec& r, const RewardInput& in);

}  // namespace lathe::rollout
