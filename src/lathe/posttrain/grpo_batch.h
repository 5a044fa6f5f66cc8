// A GRPO micro-batch: B trajectories (prompt + sampled completion) packed padding-free, each sequence at
// positions from 0 with attention of its own, and only the rows that predict a completion token wanted as
// outputs (ForwardBatch::output_rows): the policy's token log-probs come back as [N] over the completion
// tokens alone, in the same flat layout as the rollout's log-probs and the loss's inputs (grpo_loss.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/models/forward_batch.h"

namespace lathe::posttrain {

// One sampled completion of a prompt, as the rollout hands it to the trainer.
struct Trajectory {
  std::vector<int32_t> prompt;        // [P] >= 1 token
  std::vector<int32_t> completion;    // [|y|]: the sampled tokens (the stop token included when sampled)
  std::vector<float> rollout_logps;   // [|y|] the sampler's log-probs of them, or empty
  // [|y|] 1: a token the policy sampled (trained), 0: one it did not (a multi-turn episode's tool output,
  // rollout/episode_rollout.h); empty: all 1.
  std::vector<uint8_t> loss_mask;
  std::vector<double> rewards;        // [F] one per reward function; NaN: not applicable
  bool truncated = false;             // cut at max_completion_length before a stop token
  uint64_t weight_version = 0;        // the policy version that sampled it (Model::weight_version)
};

struct GrpoBatch {
  std::vector<int32_t> tokens, positions;  // [T]: prompt + completion of each sequence, packed
  std::vector<int32_t> output_rows;        // [N]: the row predicting each completion token
  std::vector<int32_t> targets;            // [N]: the completion tokens
  std::vector<int64_t> offsets;            // [B + 1]: completion i owns [offsets[i], offsets[i+1]) of [N]
  std::vector<uint8_t> loss_mask;          // [N]: the trajectories' loss masks (1 where they have none)
  int64_t n_tokens() const { return static_cast<int64_t>(targets.size()); }  // N
  ForwardBatch forward_batch() const;  // packed, with output_rows
};

// Packs `trajectories` (each prompt non-empty and each loss mask empty or one per completion token:
// InvalidArgument otherwise).
GrpoBatch make_grpo_batch(std::span<const Trajectory> trajectories);

}  // namespace lathe::posttrain
