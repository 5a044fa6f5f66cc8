// lathe sft RECIPE.yaml [key=value ...] [--resume | --overwrite]: supervised fine-tuning (docs/sft.md) on the
// pre-training loop: progress bar, metrics in <run>/metrics.jsonl, checkpoints, exact resume, a loss curve,
// and the final weights as a Hugging Face folder in <run>/model.
#include <string>

#include "lathe/posttrain/sft_trainer.h"
#include "train_command.h"

namespace lathe::cli {

const CommandSpec& sft_spec() {
  static const CommandSpec spec{
      .name = "sft",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "supervised fine-tuning on JSON Lines data (docs/sft.md)",
      .summary = "Fine-tunes model.base on data.train (TRL's JSON Lines formats: text, messages, prompt/completion) as\n"
                 "the recipe's sft: section says (docs/sft.md); key=value overrides any key, e.g. sft.max_length=512\n"
                 "schedule.steps=100. SIGINT / SIGTERM stop after the current step and write a checkpoint. Writes\n"
                 "run.dir/{recipe.yaml, metrics.jsonl, loss.svg, checkpoints/step_N/, model/} (model/: the final\n"
                 "Hugging Face folder with the tokenizer files).\n",
      .options = {
          {"--resume", "", "continue from the newest intact checkpoint in run.dir"},
          {"--overwrite", "", "delete the earlier run in run.dir first"},
      }};
  return spec;
}

int cmd_sft(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, sft_spec());
  const std::optional<RecipeArgs> r = parse_recipe_args(a, sft_spec());
  if (!r) return a.help() ? 0 : 2;
  static const FineTuneCommand cmd{
      .name = "sft",
      .has_section = [](const train::TrainConfig& c) { return !c.sft.is_null(); },
      .missing_section = "no sft: section (lathe sft reads sft.max_length, sft.packing, ...; write `sft: {}` for the"
                         " defaults; docs/sft.md)",
      .refused_sections = {{[](const train::TrainConfig& c) { return !c.distill.is_null(); },
                            "a distill: section: distil with `lathe distill` (docs/distill.md)"}},
  };
  return run_fine_tune<posttrain::SftTrainer>(*r, cmd);
}

}  // namespace lathe::cli
