// lathe dpo RECIPE.yaml [key=value ...] [--resume | --overwrite]: preference optimisation (docs/dpo.md: DPO,
// cDPO, robust, hinge, IPO, SimPO, ORPO, RPO's NLL term; KTO on unpaired data) on the shared training loop:
// progress line with the reward accuracy (KTO: the KL estimate) and margin, metrics in <run>/metrics.jsonl,
// checkpoints, exact resume, a loss curve, and the result as a Hugging Face folder (<run>/model) or a PEFT
// adapter (<run>/adapter).
#include <cmath>
#include <string>

#include "lathe/posttrain/dpo_trainer.h"
#include "train_command.h"

namespace lathe::cli {

const CommandSpec& dpo_spec() {
  static const CommandSpec spec{
      .name = "dpo",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "preference optimisation (DPO, IPO, SimPO, ORPO, KTO, ...) on preference data (docs/dpo.md)",
      .summary = "Trains model.base (or a LoRA adapter on it) on preference pairs in data.train (TRL's JSON Lines:\n"
                 "prompt/chosen/rejected; KTO: prompt/completion/label) as the recipe's dpo: section says\n"
                 "(docs/dpo.md); key=value overrides any key, e.g. dpo.beta=0.2 dpo.loss_type=ipo. SIGINT /\n"
                 "SIGTERM stop after the current step and write a checkpoint. Writes run.dir/{recipe.yaml,\n"
                 "metrics.jsonl, loss.svg, checkpoints/step_N/, model/ or adapter/}.\n",
      .options = {
          {"--resume", "", "continue from the newest intact checkpoint in run.dir"},
          {"--overwrite", "", "delete the earlier run in run.dir first"},
      }};
  return spec;
}

int cmd_dpo(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, dpo_spec());
  const std::optional<RecipeArgs> r = parse_recipe_args(a, dpo_spec());
  if (!r) return a.help() ? 0 : 2;
  static const FineTuneCommand cmd{
      .name = "dpo",
      .has_section = [](const train::TrainConfig& c) { return !c.dpo.is_null(); },
      .missing_section = "no dpo: section (lathe dpo reads dpo.beta, dpo.loss_type, ...; write `dpo: {}` for the"
                         " defaults; docs/dpo.md)",
      // KTO has no pairs to be right about: its KL estimate z0 instead of the reward accuracy.
      .after_loss = [](const train::ObjectiveMetrics& m) {
        const double acc = train::metric_value(m, "rewards/accuracies");
        const std::string head =
            std::isnan(acc) ? " kl " + fmt("%.3f", train::metric_value(m, "kl")) : " acc " + fmt("%.2f", acc);
        return head + " margin " + fmt("%.3f", train::metric_value(m, "rewards/margins"));
      },
      .after_eval = [](const train::ObjectiveMetrics& m) {
        const double acc = train::metric_value(m, "rewards/accuracies");
        return std::isnan(acc) ? " val reward margin " + fmt("%.3f", train::metric_value(m, "rewards/margins"))
                               : " val reward acc " + fmt("%.3f", acc);
      },
  };
  return run_fine_tune<posttrain::DpoTrainer>(*r, cmd);
}

}  // namespace lathe::cli
