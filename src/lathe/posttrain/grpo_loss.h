// The GRPO family's policy loss on per-token log-probs (specs/posttrain.md §5.2-5.4), for a micro-batch of B
// completions laid out flat: completion i owns tokens [offsets[i], offsets[i+1]) of the [N] arrays. With x_t
// the policy's log-prob (the one input with a gradient), o_t π_old's, r_t the reference's and A_i the
// completion's advantage:
//   coefficient   ρ_t = exp(clamp(x_t − o_t, ±20))                        token level (GRPO, Tunix clamp)
//                 s_i = exp(clamp(mean_t (x_t − o_t), ±20)) on every token   sequence level (GSPO)
//                 value s_i, ∂/∂x_t = s_i (own token only)               sequence_token (GSPO-token)
//   pg_t = −min(ρ_t·A, clip(ρ_t, 1−ε_low, 1+ε_high)·A);  dual clip (ε_c > 1, A < 0): pg_t = min(pg_t, −ε_c·A)
//   ℓ_t  = w_t·pg_t + β·KL_t,  w_t the mismatch weight (grpo_mismatch.h, a constant; 1 without it)
//   KL_t with d = r_t − x_t:  k1 = −d,  k2 = ½d²,  k3 = exp(d) − d − 1;  optionally clamped to ±kl_clamp
// and the loss aggregates ℓ over the trained tokens (mask m) as §5.3:
//   grpo                (1/B′) Σ_i [Σ_t m ℓ / Σ_t m],  B′ = completions with a trained token
//   bnpo                Σ m ℓ / Σ m  (this micro-batch)
//   dr_grpo             Σ m ℓ / (B · L_max),  L_max = max_completion_length
//   dapo                Σ m ℓ / (Σ m over the optimizer step / micro-batches in it); the loop averages the
//                       micro-batch losses, so the step's loss is Σ m ℓ / Σ m over the whole step
//   seq_mean_token_sum  (1/B′) Σ_i Σ_t m ℓ
//   token_sum_norm      Σ m ℓ / norm  (default B)
// With μ = 1 and on-policy data ρ ≡ 1 (x = o): the loss value is ≈ β·KL (0 at β = 0) while its gradient is the
// policy gradient −A·∂x (specs §5.2): a loss near 0 is expected, not a bug.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe::posttrain {

enum class GrpoAggregation : uint8_t { kGrpo, kBnpo, kDrGrpo, kDapo, kSeqMeanTokenSum, kTokenSumNorm, kCount };
enum class GrpoKl : uint8_t { kK1, kK2, kK3, kCount };
enum class GrpoRatioLevel : uint8_t { kToken, kSequence, kSequenceToken, kCount };

const char* grpo_aggregation_name(GrpoAggregation a);
GrpoAggregation grpo_aggregation_from_name(const std::string& name);  // kCount for an unknown name
const char* grpo_kl_name(GrpoKl k);
GrpoKl grpo_kl_from_name(const std::string& name);  // kCount for an unknown name
const char* grpo_ratio_level_name(GrpoRatioLevel l);
GrpoRatioLevel grpo_ratio_level_from_name(const std::string& name);  // kCount for an unknown name

// Defaults: TRL @f2cd5771 (GRPOConfig): ε 0.2 both sides, β 0 (no reference), k3, dapo aggregation.
struct GrpoLossOptions {
  double epsilon_low = 0.2, epsilon_high = 0.2;
  double epsilon_c = 0;        // dual clip (> 1); 0: off
  double beta = 0;             // KL weight; 0: no reference log-probs needed
  GrpoKl kl = GrpoKl::kK3;
  double kl_clamp = 0;         // > 0: KL_t clamped to [−kl_clamp, kl_clamp]; 0: off
  GrpoAggregation aggregation = GrpoAggregation::kDapo;
  GrpoRatioLevel ratio_level = GrpoRatioLevel::kToken;
  double log_ratio_clamp = 20;           // Tunix: |log ρ| <= 20 (no gradient beyond)
  int64_t max_completion_length = 0;     // L_max of dr_grpo (required there)
  double token_sum_norm = 0;             // token_sum_norm's divisor; 0: B
  double dapo_tokens_per_micro_batch = 0;  // dapo: Σ m over the step / its micro-batches (all ranks); 0: this one's Σ m
  bool mask_truncated_completions = false;  // DAPO overlong filtering: a truncated completion trains no token
};

// One micro-batch (views; every [N] array over the completion tokens only).
struct GrpoLossInputs {
  std::span<const int64_t> offsets;     // [B + 1], offsets[0] = 0, offsets[B] = N
  std::span<const float> old_logps;     // [N] π_old
  std::span<const float> ref_logps;     // [N] π_ref; may be empty when β = 0 (then no kl metric)
  std::span<const uint8_t> mask;        // [N] 1: a trained token
  std::span<const double> advantages;   // [B]
  std::span<const float> is_weights;    // [N] mismatch weights, or empty (all 1)
  std::span<const uint8_t> truncated;   // [B] completions cut at max length, or empty (none)
  std::span<const float> entropy;       // [N] the policy's entropy per token (a metric), or empty
};

// Token means over the trained tokens (the loss's mask) unless said otherwise.
struct GrpoLossMetrics {
  double kl = 0;                 // KL_t with the configured estimator (NaN without reference log-probs)
  double pg_clipfrac = 0;        // tokens whose clipped term is the one taken (verl/Tunix pg_clipfrac)
  double pg_clipfrac_lower = 0;  // tokens cut by the dual clip (verl/Tunix pg_clipfrac_lower)
  double entropy = 0;            // NaN without entropies
  double is_ratio_mean = 1, is_ratio_min = 1, is_ratio_max = 1;  // ρ_t (s_i at sequence level)
  double completion_mean_length = 0, completion_min_length = 0, completion_max_length = 0;  // tokens, all rows
  double completion_clipped_ratio = 0;  // fraction of completions truncated
  double trained_tokens = 0;            // Σ m after masking
};

struct GrpoLossValue {
  double loss = 0;
  std::vector<double> d_logps;  // [N] ∂loss/∂x_t
  GrpoLossMetrics metrics;
};

// The loss of policy log-probs `logps` [N] and its gradient (plain arithmetic in double). InvalidArgument on
// inconsistent sizes, a missing reference with β ≠ 0, dr_grpo without max_completion_length, bad ε.
GrpoLossValue grpo_loss_value(std::span<const float> logps, const GrpoLossInputs& in, const GrpoLossOptions& o);

// The same on a tensor: logps [N] f32 (recorded: backward adds g·∂loss/∂x to its gradient) -> loss [1] f32.
Tensor grpo_loss(const Tensor& logps, const GrpoLossInputs& in, const GrpoLossOptions& o,
                 GrpoLossMetrics* metrics = nullptr);

}  // namespace lathe::posttrain
