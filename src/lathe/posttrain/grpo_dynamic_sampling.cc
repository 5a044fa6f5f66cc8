#include "lathe/posttrain/grpo_dynamic_sampling.h"

#include <algorithm>
#include <iterator>

#include "lathe/base/error.h"

namespace lathe::posttrain {

std::vector<Trajectory> grpo_dynamic_sample(
    int64_t n_groups, int64_t group_size, int64_t max_rounds, const GrpoAdvantageOptions& adv,
    const std::function<std::vector<Trajectory>(int64_t round, int64_t n_prompts)>& sample,
    GrpoDynamicSamplingStats* stats) {
  LATHE_CHECK_ARG(n_groups >= 1 && group_size >= 2 && max_rounds >= 0, "[grpo_dynamic_sample] n_groups ", n_groups,
                  ", group_size ", group_size, ", max_rounds ", max_rounds);
  const auto g = static_cast<size_t>(group_size);
  GrpoDynamicSamplingStats st;
  std::vector<Trajectory> kept, dropped;
  for (int64_t round = 0; round <= max_rounds; ++round) {
    const int64_t missing = n_groups - static_cast<int64_t>(kept.size() / g);
    if (missing == 0) break;
    std::vector<Trajectory> trs = sample(round, missing);
    LATHE_CHECK_ARG(trs.size() == static_cast<size_t>(missing) * g, "[grpo] dynamic sampling round ", round,
                    " returned ", trs.size(), " trajectories for ", missing, " prompts x ", group_size);
    if (round > 0) ++st.refill_rounds;
    // Per group: whether any advantage is nonzero (the scale option cannot turn zeros into nonzeros).
    std::vector<std::vector<double>> rewards;
    for (const Trajectory& t : trs) rewards.push_back(t.rewards);
    const GrpoAdvantages a = grpo_advantages(rewards, group_size, adv);
    for (size_t k = 0; k < trs.size(); k += g) {
      const bool signal = std::any_of(a.advantages.begin() + static_cast<std::ptrdiff_t>(k),
                                      a.advantages.begin() + static_cast<std::ptrdiff_t>(k + g),
                                      [](double x) { return x != 0; });
      std::vector<Trajectory>& to = signal ? kept : dropped;
      to.insert(to.end(), std::make_move_iterator(trs.begin() + static_cast<std::ptrdiff_t>(k)),
                std::make_move_iterator(trs.begin() + static_cast<std::ptrdiff_t>(k + g)));
      st.dropped_groups += signal ? 0 : 1;
    }
  }
  // Out of rounds: put dropped groups back, first dropped first.
  const size_t short_by = static_cast<size_t>(n_groups) * g - kept.size();
  st.kept_zero_std_groups = static_cast<int64_t>(short_by / g);
  kept.insert(kept.end(), std::make_move_iterator(dropped.begin()),
              std::make_move_iterator(dropped.begin() + static_cast<std::ptrdiff_t>(short_by)));
  if (stats != nullptr) *stats = st;
  return kept;
}

}  // namespace lathe::posttrain
