// lathe grpo RECIPE.yaml [key=value ...] [--resume | --overwrite]: RL post-training with the GRPO family
// (docs/recipes.md "grpo:": GRPO, Dr.GRPO, DAPO, GSPO, RLOO advantages, KL to a reference, mismatch
// correction) on the shared training loop, with in-process rollouts on the serving engine over the policy
// being trained and the recipe's built-in rewards: progress line with the mean reward, metrics in
// <run>/metrics.jsonl, checkpoints, a loss curve, and the result as a Hugging Face folder (<run>/model) or a
// PEFT adapter (<run>/adapter).
#include <cmath>
#include <string>

#include "lathe/rollout/grpo_trainer.h"
#include "train_command.h"

namespace lathe::cli {

const CommandSpec& grpo_spec() {
  static const CommandSpec spec{
      .name = "grpo",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "RL post-training (GRPO, Dr.GRPO, DAPO, GSPO) with in-process rollouts (docs/recipes.md)",
      .summary = "Trains model.base (or a LoRA adapter on it) on the prompts of data.train (prompt-only JSON Lines,\n"
                 "with an optional answer column): each step samples grpo.num_generations completions per prompt\n"
                 "with the serving engine over the weights being trained, scores them with grpo.rewards and\n"
                 "takes a policy-gradient step (docs/recipes.md \"grpo:\"); key=value overrides any key, e.g.\n"
                 "grpo.beta=0.04. SIGINT / SIGTERM stop after the current step and write a checkpoint. Writes\n"
                 "run.dir/{recipe.yaml, metrics.jsonl, loss.svg, checkpoints/step_N/, model/ or adapter/}.\n",
      .options = {
          {"--resume", "", "continue from the newest intact checkpoint in run.dir"},
          {"--overwrite", "", "delete the earlier run in run.dir first"},
      }};
  return spec;
}

int cmd_grpo(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, grpo_spec());
  const std::optional<RecipeArgs> r = parse_recipe_args(a, grpo_spec());
  if (!r) return a.help() ? 0 : 2;
  static const FineTuneCommand cmd{
      .name = "grpo",
      .has_section = [](const train::TrainConfig& c) { return !c.grpo.is_null(); },
      .missing_section = "no grpo: section (lathe grpo reads grpo.num_generations, grpo.rewards, ...; docs/recipes.md)",
      // The loss of an on-policy step is ~0 by construction: the reward says how training goes.
      .after_loss = [](const train::ObjectiveMetrics& m) {
        const double kl = train::metric_value(m, "kl");  // NaN at beta 0: no reference
        return " reward " + fmt("%.3f", train::metric_value(m, "rewards/mean")) +
               (std::isnan(kl) ? "" : " kl " + fmt("%.4f", kl));
      },
  };
  return run_fine_tune<rollout::GrpoTrainer>(*r, cmd);
}

}  // namespace lathe::cli
