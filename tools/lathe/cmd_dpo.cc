// lathe dpo RECIPE.yaml [key=value ...] [--resume | --overwrite]: preference optimisation (docs/dpo.md: DPO,
// cDPO, robust, hinge, IPO, SimPO, ORPO, RPO's NLL term) on the shared training loop: progress line with the
// reward accuracy and margin, metrics in <run>/metrics.jsonl, checkpoints, exact resume, a loss curve, and the
// result as a Hugging Face folder (<run>/model) or a PEFT adapter (<run>/adapter).
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "args.h"
#include "lathe/posttrain/dpo_trainer.h"
#include "plot.h"
#include "progress.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

extern "C" void on_dpo_stop_signal(int) { posttrain::DpoTrainer::request_stop(); }

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

double metric(const train::ObjectiveMetrics& m, const std::string& name) {
  for (const auto& [k, v] : m)
    if (k == name) return v;
  return NAN;
}

}  // namespace

const CommandSpec& dpo_spec() {
  static const CommandSpec spec{
      .name = "dpo",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "preference optimisation (DPO, IPO, SimPO, ORPO, ...) on prompt/chosen/rejected data (docs/dpo.md)",
      .summary = "Trains model.base (or a LoRA adapter on it) on preference pairs in data.train (TRL's JSON Lines:\n"
                 "prompt/chosen/rejected) as the recipe's dpo: section says (docs/dpo.md); key=value overrides any\n"
                 "key, e.g. dpo.beta=0.2 dpo.loss_type=ipo. SIGINT / SIGTERM stop after the current step and write a\n"
                 "checkpoint. Writes run.dir/{recipe.yaml, metrics.jsonl, loss.svg, checkpoints/step_N/, model/ or\n"
                 "adapter/}.\n",
      .options = {
          {"--resume", "", "continue from the newest intact checkpoint in run.dir"},
          {"--overwrite", "", "delete the earlier run in run.dir first"},
      }};
  return spec;
}

int cmd_dpo(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, dpo_spec());
  std::vector<std::string> overrides;
  std::string recipe;
  for (const auto& p : a.positional) {
    if (p.find('=') != std::string::npos) overrides.push_back(p);
    else if (recipe.empty()) recipe = p;
    else throw InvalidArgument(str_cat("dpo: more than one recipe given ('", recipe, "' and '", p, "')"));
  }
  if (a.help() || recipe.empty()) {
    std::fputs(help_text(dpo_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  LATHE_CHECK_ARG(!(a.has("--resume") && a.has("--overwrite")),
                  "dpo: --resume continues the run in run.dir and --overwrite deletes it: give one of them");
  const train::StartMode mode = a.has("--resume")      ? train::StartMode::kResume
                                : a.has("--overwrite") ? train::StartMode::kOverwrite
                                                       : train::StartMode::kFresh;
  train::TrainConfig cfg = train::load_recipe(recipe, overrides);
  LATHE_CHECK_ARG(!cfg.dpo.is_null(), recipe, ": no dpo: section (lathe dpo reads dpo.beta, dpo.loss_type, ...;"
                  " write `dpo: {}` for the defaults; docs/dpo.md)");
  Progress progress(5.0);
  double last_val = -1;
  train::TrainerHooks hooks;
  hooks.on_message = [&](const std::string& m) { progress.println(m); };
  hooks.on_eval = [&](const train::EvalReport& e) {
    last_val = e.val_loss;
    progress.println("step " + std::to_string(e.step) + ": val loss " + fmt("%.4f", e.val_loss) + " val reward acc " +
                     fmt("%.3f", metric(e.metrics, "rewards/accuracies")));
  };
  hooks.on_step = [&](const train::StepReport& r) {
    std::string line = "step " + std::to_string(r.step) + "/" + std::to_string(r.steps) + " loss " +
                       fmt("%.4f", r.loss) + " acc " + fmt("%.2f", metric(r.metrics, "rewards/accuracies")) +
                       " margin " + fmt("%.3f", metric(r.metrics, "rewards/margins")) + " lr " + fmt("%.2e", r.lr) +
                       " gnorm " + fmt("%.2f", r.grad_norm) + " " + fmt("%.0f", r.tokens_per_s) + " tok/s";
    if (last_val >= 0) line += " val " + fmt("%.3f", last_val);
    progress.update(static_cast<double>(r.step) / static_cast<double>(r.steps), line, r.step == r.steps);
  };
  posttrain::DpoTrainer trainer(std::move(cfg), hooks);  // checks the dpo: section before anything runs
  const train::TrainConfig& c = trainer.config();
  std::signal(SIGINT, on_dpo_stop_signal);
  std::signal(SIGTERM, on_dpo_stop_signal);
  std::printf("lathe dpo %s -> %s\n", recipe.c_str(), c.run_dir.c_str());
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
