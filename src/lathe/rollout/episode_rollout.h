// Multi-turn, tool-using GRPO rollouts on the serving engine (Tunix's agentic RL; docs/recipes.md
// "grpo.environment"): a RolloutSource whose completions are episodes. Each episode (G per prompt, one engine
// request per model turn) generates until its turn ends in a tool call (EpisodeCodec::ends_tool_call; the
// request is finished there), the environment answers it (rollout/environment.h), the answer's tokens (the tool
// message and the next assistant header, as the chat template renders them) are appended with loss mask 0 and
// the episode continues with a new request of prompt + everything so far: the prefix cache serves the blocks
// the previous turns filled, so only the observation and the last partial block are computed again. An episode
// ends when a turn ends without a tool call (a stop token), at max_turns model turns (a call in the last turn
// is not answered), when the environment says done, or at max_completion_length tokens (model and observation
// tokens together; truncated). The trajectory's completion is every token after the prompt, its loss_mask 1
// on the model's tokens and 0 on the observations', its rollout log-probs 0 on observation tokens.
//
// Concurrency: environment calls run on worker threads (environment_calls.h) while the engine keeps stepping
// the other episodes; an episode re-enters the engine when its answer arrives, and the loop blocks only when
// every unfinished episode waits on its environment. An environment failure (a command that exits, hangs past
// its timeout or answers garbage) ends generate() with its EnvironmentError, naming the command.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lathe/rollout/engine_rollout.h"
#include "lathe/rollout/environment.h"
#include "lathe/rollout/episode_codec.h"

namespace lathe::rollout {

class EnvironmentCalls;

struct EpisodeRolloutOptions {
  // Sampling, stops, KV pool and seed as for single-turn rollouts, except: max_completion_length counts every
  // token after the prompt, the model's and the observations', and turn k of sample g of prompt p samples
  // with a key derived from the seed and all three.
  EngineRolloutOptions engine;
  int64_t max_turns = 4;  // model turns per episode
  int64_t workers = 16;   // environment calls at once
};

// What the last generate() did (tests, benches).
struct EpisodeStats {
  int64_t episodes = 0, turns = 0, tool_calls = 0, observation_tokens = 0, model_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;  // prompt tokens of the turns' requests the prefix cache served
  double seconds = 0;                   // wall time of generate()
  void add_counts(const EpisodeStats& o) {  // every count of o (not its seconds)
    episodes += o.episodes, turns += o.turns, tool_calls += o.tool_calls;
    observation_tokens += o.observation_tokens, model_tokens += o.model_tokens;
    prefix_cache_hit_tokens += o.prefix_cache_hit_tokens;
  }
};

class EpisodeRollout final : public posttrain::RolloutSource {
 public:
  // prompts: token ids, each non-empty; prompt number k is prompts[k mod size].
  EpisodeRollout(std::vector<std::vector<int32_t>> prompts, std::vector<std::string> reward_names, RewardFn rewards,
                 std::unique_ptr<Environment> environment, std::shared_ptr<const EpisodeCodec> codec,
                 EpisodeRolloutOptions o);
  ~EpisodeRollout() override;

  std::vector<std::string> reward_names() const override { return reward_names_; }
  int64_t max_prompt_tokens() const override;
  int64_t memory_bytes(const Model& policy) const override;
  std::vector<posttrain::Trajectory> generate(const Model& policy, int64_t first_prompt, int64_t n_prompts,
                                              int64_t group_size) override;
  // Per generation batch: model turns, tool calls, observation and model tokens per episode (means), and the
  // share of the turns' prompt tokens the prefix cache served.
  std::vector<std::string> metric_names() const override;
  std::vector<double> take_metrics() override;
  const EpisodeStats& last_stats() const { return stats_; }

 private:
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::string> reward_names_;
  RewardFn rewards_;
  std::unique_ptr<Environment> env_;
  std::shared_ptr<const EpisodeCodec> codec_;
  EpisodeRolloutOptions opts_;
  std::unique_ptr<EnvironmentCalls> calls_;  // its workers call env_
  const Model* policy_ = nullptr;
  std::unique_ptr<EngineCore> core_;  // built on the first generate(), kept; dropped after a failure
  uint64_t next_request_id_ = 1;
  EpisodeStats stats_;
  EpisodeStats untaken_;  // the sums since the last take_metrics()
  int64_t untaken_prompt_tokens_ = 0;  // prompt tokens of the turns' requests since then
};

}  // namespace lathe::rollout
