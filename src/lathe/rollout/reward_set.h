// The reward functions of a `lathe grpo` run, together: the built-in ones (rewards.h) and the external
// commands (command_reward.h, each process started once, here), scoring the G completions of one prompt at a
// time (one request line per group to each command).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lathe/rollout/command_reward.h"
#include "lathe/rollout/rewards.h"

namespace lathe::rollout {

class RewardSet {
 public:
  // Starts every command reward's process (InvalidArgument naming the command when one cannot start).
  explicit RewardSet(std::vector<RewardSpec> specs);

  const std::vector<RewardSpec>& specs() const { return specs_; }
  std::vector<std::string> names() const;  // [F] in order

  // group [G] -> rewards [G][F] (NaN: not applicable). Throws Error naming a command that fails.
  std::vector<std::vector<double>> score(std::span<const RewardInput> group);

 private:
  std::vector<RewardSpec> specs_;
  std::vector<std::unique_ptr<CommandReward>> commands_;  // [F]: null for the built-in kinds
};

}  // namespace lathe::rollout
