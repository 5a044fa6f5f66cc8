// GRPO-family advantages (specs/posttrain.md §5.1), from the rewards of a batch of prompt groups of G
// completions each (the group of completion i is i / G). Rewards are the weighted sum of the reward
// functions; a function may say "not applicable" (NaN) for a sample:
//   grpo:    A_i = (r_i − mean_g r) / (std_g r + eps)       std with Bessel (ddof 1), TRL eps 1e-4
//   dr_grpo: A_i = r_i − mean_g r                           (arXiv 2503.20783: no std)
//   rloo:    A_i = r_i − (1/(G−1)) Σ_{j≠i} r_j               (= G/(G−1)·(r_i − mean_g r))
// scale (TRL scale_rewards) divides the grpo / rloo centred rewards by std_g + eps (group, the default), by the
// std of the whole batch + eps (batch), or by nothing (none); dr_grpo never scales.
// A sample whose every function is N/A gets A = 0 and is left out of its group's mean and std (spec: "an
// all-N/A row gets A = 0"); a function N/A on a sample adds nothing to that sample's weighted sum (TRL nansum).
// per_reward_normalisation (GDPO, trl#4853 / tunix#977): each function is first normalised inside its group
// over the samples where it applies, (r_k − mean_g r_k) / (std_g r_k + eps), N/A -> 0, and the weighted sum of
// the normalised functions is the reward the advantage above is computed from (so one function with a large
// range cannot drown the others).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::posttrain {

enum class GrpoAdvantage : uint8_t { kGrpo, kDrGrpo, kRloo, kCount };
enum class GrpoRewardScale : uint8_t { kGroup, kBatch, kNone, kCount };

const char* grpo_advantage_name(GrpoAdvantage a);
GrpoAdvantage grpo_advantage_from_name(const std::string& name);  // kCount for an unknown name
const char* grpo_reward_scale_name(GrpoRewardScale s);
GrpoRewardScale grpo_reward_scale_from_name(const std::string& name);  // kCount for an unknown name

struct GrpoAdvantageOptions {
  GrpoAdvantage type = GrpoAdvantage::kGrpo;
  GrpoRewardScale scale = GrpoRewardScale::kGroup;  // TRL scale_rewards default
  double eps = 1e-4;                                // TRL 1e-4, Tunix 1e-6
  std::vector<double> reward_weights;               // [F]; empty: every function weighs 1
  bool per_reward_normalisation = false;            // GDPO
};

struct GrpoAdvantages {
  std::vector<double> advantages;  // [B]
  std::vector<double> rewards;     // [B]: the weighted sum (NaN where every function is N/A)
  // Means over the batch: rewards/<fn> of each function over the samples where it applies (NaN: none), and
  // frac_reward_zero_std (groups whose applicable rewards have std 0: no learning signal), rewards/{mean,
  // min,max,std}, advantage/{abs_mean,nonzero_frac}.
  std::vector<double> function_means;  // [F]
  double reward_mean = 0, reward_std = 0, reward_min = 0, reward_max = 0;
  double frac_reward_zero_std = 0, advantage_abs_mean = 0, advantage_nonzero_frac = 0;
};

// rewards [B][F] (NaN: not applicable), B a multiple of group_size G >= 2 (InvalidArgument otherwise, or for
// rows of unequal F or weights of another length).
GrpoAdvantages grpo_advantages(const std::vector<std::vector<double>>& rewards, int64_t group_size,
                               const GrpoAdvantageOptions& o);

// DAPO's soft overlong punishment (arXiv 2503.14476), in completion tokens: 0 up to L_max − L_cache tokens,
// then a linear ramp ((L_max − L_cache) − |y|) / L_cache down to −1 at L_max, −1 beyond. 0 < L_cache <= L_max.
double soft_overlong_punishment(int64_t completion_tokens, int64_t max_tokens, int64_t cache_tokens);

}  // namespace lathe::posttrain
