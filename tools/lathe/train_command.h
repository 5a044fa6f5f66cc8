// What the training commands share: the command line `RECIPE.yaml [key=value ...] [--resume | --overwrite]`
// (pretrain, sft, dpo, distill), SIGINT / SIGTERM stopping after the current step, and for the fine-tuning
// commands (sft, dpo, distill) the whole console: progress line, evaluation lines, closing lines.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "args.h"
#include "lathe/train/train_loop.h"
#include "progress.h"

namespace lathe::cli {

std::string fmt(const char* format, double x);  // snprintf of one number

// " [attempt 2, 1/2 ranks, 1 restarts]" under `lathe launch` (which sets LATHE_LAUNCH_NOTE for every
// attempt), for the end of the progress line; "" otherwise.
std::string launch_note();

struct RecipeArgs {
  std::string recipe;
  std::vector<std::string> overrides;  // key=value
  train::StartMode mode = train::StartMode::kFresh;
};

// The recipe, its overrides and --resume / --overwrite (both: InvalidArgument). nullopt when --help was
// given or no recipe was: the help is printed and the command returns a.help() ? 0 : 2.
std::optional<RecipeArgs> parse_recipe_args(const Args& a, const CommandSpec& spec);

// While alive, SIGINT, SIGTERM and SIGUSR1 (which mpirun forwards to the ranks) ask the training loop to stop after its current step (with a checkpoint);
// the default handlers come back when it goes.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

// A fine-tuning command: its name, the recipe section that selects it (with the hint printed when it is
// missing), and its own fields of the progress line.
struct FineTuneCommand {
  std::string name;                                           // "sft": "lathe sft RECIPE -> RUN_DIR"
  std::function<bool(const train::TrainConfig&)> has_section;  // the recipe is this command's
  std::string missing_section;  // the error after "RECIPE: " when it is not
  // Sections of other commands this one refuses: {present, the error after "RECIPE: "}.
  std::vector<std::pair<std::function<bool(const train::TrainConfig&)>, std::string>> refused_sections;
  // Extra fields of the progress line after the loss (DPO: reward accuracy and margin) and after the speed
  // (distillation: KL per token), and of an evaluation line; each empty when unset.
  std::function<std::string(const train::ObjectiveMetrics&)> after_loss, after_speed, after_eval;
};

// Runs a fine-tuning command whose trainer is built from (config, hooks) and has config(), run(mode) and
// output_dir() (posttrain::SftTrainer, DpoTrainer, DistillTrainer): checks the recipe has the section,
// trains with a progress line, plots the loss and prints where the result is. The exit code (130: stopped
// early by a signal, with a checkpoint).
template <class Trainer>
int run_fine_tune(const RecipeArgs& r, const FineTuneCommand& cmd);

// The parts of run_fine_tune that do not depend on the trainer's type.
train::TrainConfig load_fine_tune_recipe(const RecipeArgs& r, const FineTuneCommand& cmd);
train::TrainerHooks fine_tune_hooks(Progress& progress, const FineTuneCommand& cmd);
int report_fine_tune(const train::TrainResult& res, const train::TrainConfig& c, const std::string& output_dir);

template <class Trainer>
int run_fine_tune(const RecipeArgs& r, const FineTuneCommand& cmd) {
  Progress progress(5.0);
  Trainer trainer(load_fine_tune_recipe(r, cmd), fine_tune_hooks(progress, cmd));  // checks its section first
  const train::TrainConfig& c = trainer.config();
  std::printf("lathe %s %s -> %s\n", cmd.name.c_str(), r.recipe.c_str(), c.run_dir.c_str());
  std::fflush(stdout);
  train::TrainResult res;
  {
    const StopSignals stop;
    res = trainer.run(r.mode);  // run.dir stays locked while `trainer` lives
    progress.finish();
  }
  return report_fine_tune(res, c, trainer.output_dir());
}

}  // namespace lathe::cli
