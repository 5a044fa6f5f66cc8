// lathe sft RECIPE.yaml [key=value ...] [--resume | --overwrite]: supervised fine-tuning (docs/sft.md) on the
// pre-training loop: progress bar, metrics in <run>/metrics.jsonl, checkpoints, exact resume, a loss curve,
// and the final weights as a Hugging Face folder in <run>/model.
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "args.h"
#include "lathe/posttrain/sft_trainer.h"
#include "plot.h"
#include "progress.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

extern "C" void on_sft_stop_signal(int) { posttrain::SftTrainer::request_stop(); }

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

}  // namespace

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
  std::vector<std::string> overrides;
  std::string recipe;
  for (const auto& p : a.positional) {
    if (p.find('=') != std::string::npos) overrides.push_back(p);
    else if (recipe.empty()) recipe = p;
    else throw InvalidArgument(str_cat("sft: more than one recipe given ('", recipe, "' and '", p, "')"));
  }
  if (a.help() || recipe.empty()) {
    std::fputs(help_text(sft_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  LATHE_CHECK_ARG(!(a.has("--resume") && a.has("--overwrite")),
                  "sft: --resume continues the run in run.dir and --overwrite deletes it: give one of them");
  const train::StartMode mode = a.has("--resume")      ? train::StartMode::kResume
                                : a.has("--overwrite") ? train::StartMode::kOverwrite
                                                       : train::StartMode::kFresh;
  train::TrainConfig cfg = train::load_recipe(recipe, overrides);
  LATHE_CHECK_ARG(!cfg.sft.is_null(), recipe, ": no sft: section (lathe sft reads sft.max_length, sft.packing, ...;"
                  " write `sft: {}` for the defaults; docs/sft.md)");
  LATHE_CHECK_ARG(cfg.distill.is_null(), recipe, ": a distill: section: distil with `lathe distill` (docs/distill.md)");
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
    if (last_val >= 0) line += " val " + fmt("%.3f", last_val);
    progress.update(static_cast<double>(r.step) / static_cast<double>(r.steps), line, r.step == r.steps);
  };
  posttrain::SftTrainer trainer(std::move(cfg), hooks);  // checks the sft: section before anything runs
  const train::TrainConfig& c = trainer.config();
  std::signal(SIGINT, on_sft_stop_signal);
  std::signal(SIGTERM, on_sft_stop_signal);
  std::printf("lathe sft %s -> %s\n", recipe.c_str(), c.run_dir.c_str());
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
