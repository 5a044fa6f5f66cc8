// lathe distill RECIPE.yaml [key=value ...] [--resume | --overwrite]: offline logit distillation from a frozen
// teacher (docs/distill.md) on the shared training loop, as lathe sft: progress line, metrics, checkpoints,
// exact resume, a loss curve, and <run>/model (or <run>/adapter with a lora: section).
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "args.h"
#include "lathe/posttrain/distill_trainer.h"
#include "plot.h"
#include "progress.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

extern "C" void on_distill_stop_signal(int) { posttrain::DistillTrainer::request_stop(); }

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

}  // namespace

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
  std::vector<std::string> overrides;
  std::string recipe;
  for (const auto& p : a.positional) {
    if (p.find('=') != std::string::npos) overrides.push_back(p);
    else if (recipe.empty()) recipe = p;
    else throw InvalidArgument(str_cat("distill: more than one recipe given ('", recipe, "' and '", p, "')"));
  }
  if (a.help() || recipe.empty()) {
    std::fputs(help_text(distill_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  LATHE_CHECK_ARG(!(a.has("--resume") && a.has("--overwrite")),
                  "distill: --resume continues the run in run.dir and --overwrite deletes it: give one of them");
  const train::StartMode mode = a.has("--resume")      ? train::StartMode::kResume
                                : a.has("--overwrite") ? train::StartMode::kOverwrite
                                                       : train::StartMode::kFresh;
  train::TrainConfig cfg = train::load_recipe(recipe, overrides);
  LATHE_CHECK_ARG(!cfg.distill.is_null(), recipe, ": no distill: section (lathe distill reads distill.teacher,"
                  " distill.loss, ...; docs/distill.md)");
  Progress progress(5.0);
  double last_val = -1;
  train::TrainerHooks hooks;
  hooks.on_message = [&](const std::string& m) { progress.println(m); };
  hooks.on_eval = [&](const train::EvalReport& e) {
    last_val = e.val_loss;
    progress.println("step " + std::to_string(e.step) + ": val loss " + fmt("%.4f", e.val_loss));
  };
  hooks.on_step = [&](const train::StepReport& r) {
    std::string line = "step " + std::to_string(r.step) + "/" + std::to_string(r.steps) + " loss " +
                       fmt("%.4f", r.loss) + " lr " + fmt("%.2e", r.lr) + " gnorm " + fmt("%.2f", r.grad_norm) + " " +
                       fmt("%.0f", r.tokens_per_s) + " tok/s";
    for (const auto& [k, v] : r.metrics)
      if (k == "kl_per_token") line += " kl/tok " + fmt("%.4f", v);
    if (last_val >= 0) line += " val " + fmt("%.3f", last_val);
    progress.update(static_cast<double>(r.step) / static_cast<double>(r.steps), line, r.step == r.steps);
  };
  posttrain::DistillTrainer trainer(std::move(cfg), hooks);  // checks the distill: section before anything runs
  const train::TrainConfig& c = trainer.config();
  std::signal(SIGINT, on_distill_stop_signal);
  std::signal(SIGTERM, on_distill_stop_signal);
  std::printf("lathe distill %s -> %s\n", recipe.c_str(), c.run_dir.c_str());
  std::fflush(stdout);
  const train::TrainResult res = trainer.run(mode);  // run.dir stays locked while `trainer` lives
  progress.finish();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);

  const std::string svg = (fs::path(c.run_dir) / "loss.svg").string();
  write_training_plot(c.run_dir, svg);
  if (res.stopped_early) {
    std::printf("stopped at step %lld; checkpoint %s (continue with --resume)\n", (long long)res.steps_done,
                res.last_checkpoint.c_str());
    return 130;
  }
  std::printf("done: %lld steps, final train loss %.4f", (long long)res.steps_done, res.final_loss);
  if (res.final_val_loss >= 0) std::printf(", val loss %.4f", res.final_val_loss);
  std::printf("\ncheckpoint: %s\n%s: %s\nloss curve: %s\n", res.last_checkpoint.c_str(),
              c.lora.is_null() ? "model" : "adapter (PEFT; lathe merge BASE ADAPTER OUT merges it)",
              trainer.output_dir().c_str(), svg.c_str());
  return 0;
}

}  // namespace lathe::cli
