// Rollout/trainer mismatch correction (specs/posttrain.md §5.6): the sampler's log-probs differ from the
// trainer's (other kernels, other batch shapes), so the rollout is slightly off-policy even at μ = 1. With
// Δ_t = log π_trainer_old(o_t) − log π_sampler(o_t) over the trained tokens, each token's policy-gradient term
// is multiplied by a stop-gradient weight (the KL term is not: TRL multiplies before adding β·KL):
//   token_truncate     w_t = min(exp Δ_t, C_max)                      (Tunix sampler_is="token", C = 2)
//   token_mask         w_t = exp Δ_t inside [C_min, C_max], else 0
//   sequence_truncate  w_i = min(exp S_i, C_max) on every token of sequence i
//   sequence_mask      w_i = exp S_i inside [C_min, C_max], else 0    (TRL's default with vLLM, C_max 3)
// where S_i = Σ_t Δ_t (TRL @f2cd5771: the product of the token ratios) or, with sequence_mean, mean_t Δ_t.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lathe::posttrain {

enum class GrpoMismatchMode : uint8_t { kNone, kTokenTruncate, kTokenMask, kSequenceTruncate, kSequenceMask, kCount };

const char* grpo_mismatch_mode_name(GrpoMismatchMode m);
GrpoMismatchMode grpo_mismatch_mode_from_name(const std::string& name);  // kCount for an unknown name

struct GrpoMismatchOptions {
  GrpoMismatchMode mode = GrpoMismatchMode::kNone;
  double c_max = 3.0;          // TRL vllm_importance_sampling_cap
  double c_min = 0.0;          // mask modes only: weights below it are masked (0: no lower bound)
  bool sequence_mean = false;  // sequence modes: exp(mean_t Δ_t) instead of exp(Σ_t Δ_t)
};

struct GrpoMismatch {
  std::vector<float> weights;  // [N]: the weight of each token (1 with mode none; 0 off the mask)
  // sampler_trainer/{logp_diff_mean, logp_diff_max} (|Δ_t|), prob_diff_mean (|exp old − exp sampler|),
  // probs_pearson_corr (of exp old and exp sampler; NaN when either is constant), over the trained tokens;
  // sampler_is/{weight_mean, weight_max, weight_min} of the applied weights (over tokens, or sequences in the
  // sequence modes) and frac_clipped (raw weights above C_max or below C_min).
  double logp_diff_mean = 0, logp_diff_max = 0, prob_diff_mean = 0, probs_pearson_corr = 0;
  double weight_mean = 1, weight_max = 1, weight_min = 1, frac_clipped = 0;
};

// old_logps, sampler_logps, mask [N] (completion tokens of B sequences, sequence i at [offsets[i],
// offsets[i+1]); offsets [B + 1]). Untrained tokens (mask 0) get weight 0 and are left out of every statistic.
GrpoMismatch grpo_mismatch(std::span<const float> old_logps, std::span<const float> sampler_logps,
                           std::span<const uint8_t> mask, std::span<const int64_t> offsets,
                           const GrpoMismatchOptions& o);

}  // namespace lathe::posttrain
