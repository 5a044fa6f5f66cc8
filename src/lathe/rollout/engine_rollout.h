// In-process GRPO rollouts on the serving engine (specs/posttrain.md §5, §8.2-8.3, DESIGN.md "Seams" 5): a
// RolloutSource that samples the G completions of each prompt as one engine request with n = G (the children
// share the prompt's KV blocks), over the policy being trained: the EngineCore's forward reads the model's live
// f32 weights and its training LoRA adapters in place (no copy, no sync), so every trajectory is stamped with
// Model::weight_version() as it is when sampling. Prefix-cache blocks are salted with that version, so no block
// computed with older weights is ever reused. The sampler returns the log-probs of the distribution it drew
// from (logprobs_mode processed: temperature and top-k / top-p applied), the ones the trainer's ratio replays.
// Rewards come from a caller's function of (prompt number, the prompt's group of trajectories).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lathe/infer/sampling_params.h"
#include "lathe/posttrain/grpo_objective.h"
#include "lathe/serve/engine/engine_config.h"

namespace lathe {
class EngineCore;
}

namespace lathe::rollout {

// [G][F] rewards of the G trajectories of one prompt (NaN: not applicable); prompt_index is the prompt's index in
// the list.
using RewardFn = std::function<std::vector<std::vector<double>>(int64_t prompt_index,
                                                                std::span<const posttrain::Trajectory> group)>;

struct EngineRolloutOptions {
  int64_t max_completion_length = 512;  // output cap of every completion
  SamplingParams sampling;              // temperature, top_k, top_p, ...; n, max_tokens, logprobs, seed are set here
  std::vector<int32_t> stop_token_ids;  // besides the model's eos ids
  int64_t kv_cache_memory = 0;          // bytes of the KV pool (0: the engine's default)
  uint64_t seed = 0;                    // request p samples with derive_key(seed, p): a resumed run redraws the same
};

// The engine a rollout source samples on: o's KV budget and seed, room for the longest prompt plus
// max_completion_length tokens.
EngineConfig rollout_engine_config(const EngineRolloutOptions& o, int64_t max_prompt_tokens);

class EngineRollout final : public posttrain::RolloutSource {
 public:
  // prompts: token ids, each non-empty; prompt number k is prompts[k mod size] (epochs repeat the list).
  EngineRollout(std::vector<std::vector<int32_t>> prompts, std::vector<std::string> reward_names, RewardFn rewards,
                EngineRolloutOptions o);
  ~EngineRollout() override;

  std::vector<std::string> reward_names() const override { return reward_names_; }
  int64_t max_prompt_tokens() const override;
  int64_t memory_bytes(const Model& policy) const override;
  std::vector<posttrain::Trajectory> generate(const Model& policy, int64_t first_prompt, int64_t n_prompts,
                                              int64_t group_size) override;

 private:
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::string> reward_names_;
  RewardFn rewards_;
  EngineRolloutOptions opts_;
  const Model* policy_ = nullptr;     // the model core_ runs over
  std::unique_ptr<EngineCore> core_;  // built on the first generate(), kept (its KV pool is allocated once)
  uint64_t next_request_id_ = 1;
};

}  // namespace lathe::rollout
