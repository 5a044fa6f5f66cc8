// `lathe grpo`: the shared training loop (train/train_loop.h) with the GRPO objective (posttrain/
// grpo_objective.h) fed by in-process rollouts on the serving engine (engine_rollout.h) over the policy being
// trained, scored by the recipe's rewards (reward_set.h: the built-in ones of rewards.h and external commands).
// data.train holds prompt-only rows (TRL's `prompt`, a string or a conversation rendered with the chat template
// and its generation prompt) and any other columns, which reach the rewards by name (`answer` by default). With
// grpo.environment the completions are multi-turn tool episodes (episode_rollout.h) whose tool output the loss
// skips, and the rewards read the model's tokens only. Like `lathe dpo`, the run folder holds recipe.yaml,
// metrics.jsonl and checkpoints/; at the end <run>/model, or <run>/adapter for a LoRA run.
#pragma once

#include <string>

#include "lathe/posttrain/grpo_options.h"
#include "lathe/rollout/reward_set.h"
#include "lathe/train/train_loop.h"

namespace lathe::rollout {

class GrpoTrainer {
 public:
  // cfg: a resolved recipe with a grpo: section (grpo_options and the rewards are checked now).
  explicit GrpoTrainer(train::TrainConfig cfg, train::TrainerHooks hooks = {});

  const posttrain::GrpoOptions& options() const { return opts_; }
  const train::TrainConfig& config() const { return loop_.config(); }
  train::TrainResult run(train::StartMode mode);
  static void request_stop() { train::TrainLoop::request_stop(); }
  std::string output_dir() const;

 private:
  posttrain::GrpoOptions opts_;
  std::vector<RewardSpec> rewards_;
  train::TrainLoop loop_;
};

}  // namespace lathe::rollout
