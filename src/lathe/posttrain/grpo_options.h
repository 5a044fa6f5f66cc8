// The `grpo:` section of a recipe (docs/recipes.md "grpo:"), with the data.* keys the GRPO objective reads.
// Every key is checked: an unknown key, a wrong type or an impossible value is an InvalidArgument naming the
// recipe and the key. Defaults are TRL's GRPOConfig @f2cd5771 (specs/posttrain.md §7), written into the
// resolved recipe so a run folder says what it trained with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/posttrain/grpo_advantages.h"
#include "lathe/posttrain/grpo_loss.h"
#include "lathe/posttrain/grpo_mismatch.h"
#include "lathe/train/recipe.h"

namespace lathe::posttrain {

struct GrpoOptions {
  int64_t num_generations = 8;          // grpo.num_generations: G completions per prompt (>= 2)
  int64_t max_completion_length = 512;  // grpo.max_completion_length: tokens (dr_grpo's L_max, the overlong ramp)
  int64_t batch_size = 0;               // data.batch_size: completions per micro-batch, all ranks
  int64_t grad_accum = 1;               // data.grad_accum: micro-batches per optimizer step
  // grpo.steps_per_generation: micro-batches trained per generation batch (TRL semantics; default
  // grad_accum: one optimizer step per generation batch). A generation batch holds
  // batch_size · steps_per_generation completions, whole groups.
  int64_t steps_per_generation = 0;
  int64_t num_iterations = 1;           // grpo.num_iterations: μ passes over each generation batch
  GrpoLossOptions loss;                 // epsilon, epsilon_high, epsilon_c, beta, kl_estimator, kl_clamp, loss_type,
                                        // importance_sampling_level, log_ratio_clamp, token_sum_norm,
                                        // mask_truncated_completions (+ max_completion_length)
  GrpoAdvantageOptions advantage;       // advantage_type, scale_rewards, advantage_epsilon, reward_weights,
                                        // per_reward_normalisation
  GrpoMismatchOptions mismatch;         // importance_sampling_correction, _cap, _min, _sequence (sum | mean)
  bool use_rollout_logps = false;       // grpo.use_rollout_log_probs: π_old = the sampler's log-probs
  int64_t overlong_buffer = 0;          // grpo.overlong_buffer: DAPO soft punishment over the last this many
                                        // tokens (an extra reward "overlong"); 0: off
  bool dynamic_sampling = false;        // grpo.dynamic_sampling: DAPO, drop groups without reward variance, refill
  int64_t max_resample_rounds = 3;      // grpo.max_resample_rounds: extra sampling rounds per generation batch
  // The rollout (read by `lathe grpo`'s rollout source, rollout/grpo_trainer.h):
  std::string train_data;               // data.train: prompt-only JSON Lines (+ an optional answer column)
  std::string tokenizer;                // grpo.tokenizer, else model.base
  int64_t max_prompt_length = 512;      // grpo.max_prompt_length: longer prompts keep their last tokens (TRL)
  double temperature = 1.0;             // grpo.temperature (TRL 1.0)
  double top_p = 1.0;                   // grpo.top_p
  int64_t top_k = 0;                    // grpo.top_k (0: off)
  nlohmann::json rewards;               // grpo.rewards: the built-in reward functions (rollout/rewards.h checks them)
  nlohmann::json environment;           // grpo.environment: multi-turn tool episodes (rollout/environment.h checks it)
  std::string ref_model;                // grpo.ref_model ("" = model.base, or with LoRA the adapter off)
  std::string model_base;               // model.base
  bool lora = false;                    // the recipe has a lora: section
  uint64_t seed = 0;                    // run.seed

  int64_t generation_batch() const { return batch_size * steps_per_generation; }  // completions, all ranks
  // π_old = sg[π_θ]: every micro-batch of a generation batch is trained before the first optimizer step.
  bool on_policy() const { return num_iterations == 1 && steps_per_generation == grad_accum && !use_rollout_logps; }
};

// From a resolved recipe whose `grpo` is set; writes the defaults it applied into c.resolved["grpo"].
GrpoOptions grpo_options(train::TrainConfig& c);

}  // namespace lathe::posttrain
