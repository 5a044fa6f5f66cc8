// DAPO dynamic sampling (arXiv 2503.14476; specs/posttrain.md §5.4): a prompt group whose completions all get
// the same reward (every advantage 0: 0 or G correct) carries no policy gradient, so it is dropped and the
// batch is refilled with new prompts' groups, sampled in extra rounds, until it holds the groups it needs or
// max_rounds extra rounds are spent; then the remaining places are filled with dropped groups (their
// advantages are 0: they add tokens to the normalisers, not gradient), so a step never waits for ever.
// Neither Tunix (a TODO) nor TRL ("not supported") implements it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lathe/posttrain/grpo_advantages.h"
#include "lathe/posttrain/grpo_batch.h"

namespace lathe::posttrain {

struct GrpoDynamicSamplingStats {
  int64_t dropped_groups = 0;        // groups without signal set aside, over every round
  int64_t refill_rounds = 0;         // extra rounds sampled
  int64_t kept_zero_std_groups = 0;  // dropped groups put back because max_rounds was reached
};

// sample(round, n_prompts) -> n_prompts groups of G trajectories (scored: rewards set), round 0 the batch's
// own prompts, round r >= 1 the r-th refill (the caller numbers its prompts). Asks for n_groups groups in round
// 0, then for as many as are still missing. Returns n_groups groups in the order they were kept (groups with
// signal first, then the put-back ones); a group has signal when some advantage (grpo_advantages with `adv`)
// is nonzero.
std::vector<Trajectory> grpo_dynamic_sample(
    int64_t n_groups, int64_t group_size, int64_t max_rounds, const GrpoAdvantageOptions& adv,
    const std::function<std::vector<Trajectory>(int64_t round, int64_t n_prompts)>& sample,
    GrpoDynamicSamplingStats* stats);

}  // namespace lathe::posttrain
