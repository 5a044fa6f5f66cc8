// lathe distill RECIPE.yaml [key=value ...] [--resume | --overwrite]: logit distillation from a frozen teacher
// (docs/distill.md), offline or on-policy (distill.lmbda: the student's own samples from the serving engine), on
// the shared training loop, as lathe sft: progress line, metrics, checkpoints,
// exact resume, a loss curve, and <run>/model (or <run>/adapter with a lora: section).
// lathe distill-cache RECIPE.yaml [key=value ...] --out FILE: the teacher's top-k logits on disk, read by
// distill.teacher_logits in place of the teacher.
#include <cstdio>
#include <string>
#include <vector>

#include "lathe/posttrain/distill_cache.h"
#include "lathe/rollout/engine_completion_sampler.h"
#include "train_command.h"

namespace lathe::cli {

const CommandSpec& distill_spec() {
  static const CommandSpec spec{
      .name = "distill",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "logit distillation from a frozen teacher on JSON Lines data (docs/distill.md)",
      .summary = "Trains model.base (the student) to match distill.teacher's token distributions on data.train (SFT's\n"
                 "JSON Lines formats and masks) as the recipe's distill: section says (docs/distill.md): forward KL,\n"
                 "reverse KL or generalised JSD at a temperature, mixed with the hard-label NLL by alpha; with\n"
                 "distill.lmbda > 0 a step trains on completions the student samples itself (on-policy GKD).\n"
                 "key=value overrides any key, e.g. distill.loss=jsd distill.lmbda=0.5 schedule.steps=100.\n"
                 "SIGINT / SIGTERM stop after the current step and write a checkpoint. Writes run.dir/{recipe.yaml,\n"
                 "metrics.jsonl, loss.svg, checkpoints/step_N/, model/ (or adapter/ with a lora: section)}.\n",
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
        for (const auto& [k, v] : m) {
          if (k == "kl_per_token") fields += " kl/tok " + fmt("%.4f", v);
          if (k == "on_policy") fields += " on-policy " + fmt("%.2f", v);
        }
        return fields;
      },
  };
  return run_fine_tune<rollout::EngineDistillTrainer>(*r, cmd);
}

const CommandSpec& distill_cache_spec() {
  static const CommandSpec spec{
      .name = "distill-cache",
      .usage = "RECIPE.yaml [key=value ...] --out FILE",
      .brief = "run a distillation teacher once and write its top-k logits to a file (docs/distill.md)",
      .summary = "Runs distill.teacher over the recipe's data.train, encoded as lathe distill encodes it, and writes\n"
                 "its distill.top_k largest logits at every trained position to FILE (a teacher cache,\n"
                 "docs/distill.md). Train from it with distill.teacher_logits=FILE distill.teacher=null and the\n"
                 "same data keys and top_k; a cache written for other data or another k is refused at start.\n"
                 "One process.\n",
      .options = {
          {"--out", "FILE", "the teacher cache to write (replaced atomically)"},
      }};
  return spec;
}

int cmd_distill_cache(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, distill_cache_spec());
  const std::optional<RecipeArgs> r = parse_recipe_args(a, distill_cache_spec());
  if (!r) return a.help() ? 0 : 2;
  const std::string out = a.str("--out", "");
  LATHE_CHECK_ARG(!out.empty(), "distill-cache: --out FILE is required");
  train::TrainConfig cfg = train::load_recipe(r->recipe, r->overrides);
  LATHE_CHECK_ARG(!cfg.distill.is_null(), r->recipe, ": no distill: section (distill-cache reads distill.teacher"
                  " and distill.top_k; docs/distill.md)");
  const posttrain::DistillCacheResult res = posttrain::write_distill_cache(
      std::move(cfg), out, [](const std::string& m) { std::printf("%s\n", m.c_str()); });
  std::printf("wrote %s: %lld positions of %lld sequences, top %lld logits each, %lld bytes\n", out.c_str(),
              static_cast<long long>(res.n_rows), static_cast<long long>(res.n_sources),
              static_cast<long long>(res.k), static_cast<long long>(res.bytes));
  return 0;
}

}  // namespace lathe::cli
