// lathe distill RECIPE.yaml [key=value ...] [--resume | --overwrite]: offline logit distillation from a frozen
// teacher (docs/distill.md) on the shared training loop, as lathe sft: progress line, metrics, checkpoints,
// exact resume, a loss curve, and <run>/model (or <run>/adapter with a lora: section).
#include <string>

#include "lathe/posttrain/distill_trainer.h"
#include "train_command.h"

namespace lathe::cli {

const CommandSpec& distill_spec() {
  static const CommandSpec spec{
      .name = "distill",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "logit distillation from a frozen teacher on JSON Lines data (docs/distill.md)",
      .summary = "Trains model.base (the student) to match distill.teacher's token distributions on data.train (SFT's\n"
                 "JSON Lines formats and masks) as the recipe's distill: section says (docs/distill.md): forward KL,\n"
                 "reverse KL or generalised JSD at a temperature, mixed with the hard-label NLL by alpha. key=value\n"
                 "overrides any key, e.g. distill.loss=jsd schedule.steps=100. SIGINT / SIGTERM stop after the\n"
                 "current step and write a checkpoint. Writes run.dir/{recipe.yaml, metrics.jsonl, loss.svg,\n"
                 "checkpoints/step_N/, model/ (or adapter/ with a lora: section)}.\n",
      .options = {
          {"--resume", "", "continue from the newest intact checkpoint in run.dir"},
          {"--overwrite", "", "delete the earlier run in run.dir first"},
      }};
  return spec;
}

int cmd_distill(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, distill_spec());
  const std::optional<RecipeArgs> r = parse_recipe_args(a, distill_spec());
  if (!r) return a.help() ? 0 : 2;
  static const FineTuneCommand cmd{
      .name = "distill",
      .has_section = [](const train::TrainConfig& c) { return !c.distill.is_null(); },
      .missing_section = "no distill: section (lathe distill reads distill.teacher, distill.loss, ...; docs/distill.md)",
      .after_speed = [](const train::ObjectiveMetrics& m) {
        std::string fields;
        for (const auto& [k, v] : m)
          if (k == "kl_per_token") fields += " kl/tok " + fmt("%.4f", v);
        return fields;
      },
  };
  return run_fine_tune<posttrain::DistillTrainer>(*r, cmd);
}

}  // namespace lathe::cli
