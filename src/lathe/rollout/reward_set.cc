#include "lathe/rollout/reward_set.h"

#include <utility>

namespace lathe::rollout {

RewardSet::RewardSet(std::vector<RewardSpec> specs) : specs_(std::move(specs)) {
  for (const RewardSpec& r : specs_)
    commands_.push_back(r.kind == RewardKind::kCommand ? std::make_unique<CommandReward>(r.command, r.timeout) : nullptr);
}

std::vector<std::string> RewardSet::names() const {
  std::vector<std::string> out;
  for (const RewardSpec& r : specs_) out.push_back(r.name);
  return out;
}

std::vector<std::vector<double>> RewardSet::score(std::span<const RewardInput> group) {
  std::vector<std::vector<double>> out(group.size(), std::vector<double>(specs_.size()));
  for (size_t f = 0; f < specs_.size(); ++f) {
    if (commands_[f] == nullptr) {
      for (size_t g = 0; g < group.size(); ++g) out[g][f] = reward_value(specs_[f], group[g]);
      continue;
    }
    nlohmann::json requests = nlohmann::json::array();
    for (const RewardInput& in : group)
      requests.push_back({{"prompt", in.prompt},
                          {"completion", in.completion},
                          {"completion_tokens", in.completion_tokens},
                          {"columns", in.columns != nullptr ? nlohmann::json(*in.columns) : nlohmann::json::object()}});
    const std::vector<double> v = commands_[f]->score(requests);
    for (size_t g = 0; g < group.size(); ++g) out[g][f] = v[g];
  }
  return out;
}

}  // namespace lathe::rollout
