#include "train_command.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "lathe/base/error.h"
#include "plot.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

extern "C" void on_stop_signal(int) { train::TrainLoop::request_stop(); }

}  // namespace

std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

std::string launch_note() {
  const char* note = std::getenv("LATHE_LAUNCH_NOTE");
  return note && *note ? str_cat(" [", note, "]") : std::string();
}

std::optional<RecipeArgs> parse_recipe_args(const Args& a, const CommandSpec& spec) {
  RecipeArgs r;
  for (const auto& p : a.positional) {
    if (p.find('=') != std::string::npos) r.overrides.push_back(p);
    else if (r.recipe.empty()) r.recipe = p;
    else throw InvalidArgument(str_cat(spec.name, ": more than one recipe given ('", r.recipe, "' and '", p, "')"));
  }
  if (a.help() || r.recipe.empty()) {
    std::fputs(help_text(spec).c_str(), stderr);
    return std::nullopt;
  }
  // A command that writes no run folder (distill-cache) declares neither flag: it always starts fresh.
  const auto given = [&](const char* flag) {
    return std::any_of(spec.options.begin(), spec.options.end(), [&](const OptionSpec& o) { return o.name == flag; }) &&
           a.has(flag);
  };
  LATHE_CHECK_ARG(!(given("--resume") && given("--overwrite")), spec.name,
                  ": --resume continues the run in run.dir and --overwrite deletes it: give one of them");
  r.mode = given("--resume")      ? train::StartMode::kResume
           : given("--overwrite") ? train::StartMode::kOverwrite
                                  : train::StartMode::kFresh;
  return r;
}

StopSignals::StopSignals() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);  // mpirun forwards SIGUSR1 to every rank (lathe launch's clean stop)
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGUSR1, SIG_DFL);
}

train::TrainConfig load_fine_tune_recipe(const RecipeArgs& r, const FineTuneCommand& cmd) {
  train::TrainConfig cfg = train::load_recipe(r.recipe, r.overrides);
  LATHE_CHECK_ARG(cmd.has_section(cfg), r.recipe, ": ", cmd.missing_section);
  for (const auto& [present, error] : cmd.refused_sections) LATHE_CHECK_ARG(!present(cfg), r.recipe, ": ", error);
  return cfg;
}

train::TrainerHooks fine_tune_hooks(Progress& progress, const FineTuneCommand& cmd) {
  const auto extra = [](const std::function<std::string(const train::ObjectiveMetrics&)>& f,
                        const train::ObjectiveMetrics& m) { return f ? f(m) : std::string(); };
  auto last_val = std::make_shared<double>(-1);  // the latest validation loss, shown on the progress line
  train::TrainerHooks hooks;
  hooks.on_message = [&progress](const std::string& m) { progress.println(m); };
  hooks.on_eval = [&progress, &cmd, extra, last_val](const train::EvalReport& e) {
    *last_val = e.val_loss;
    progress.println("step " + std::to_string(e.step) + ": val loss " + fmt("%.4f", e.val_loss) +
                     extra(cmd.after_eval, e.metrics));
  };
  hooks.on_step = [&progress, &cmd, extra, last_val](const train::StepReport& r) {
    std::string line = "step " + std::to_string(r.step) + "/" + std::to_string(r.steps) + " loss " +
                       fmt("%.4f", r.loss) + extra(cmd.after_loss, r.metrics) + " lr " + fmt("%.2e", r.lr) +
                       " gnorm " + fmt("%.2f", r.grad_norm) + " " + fmt("%.0f", r.tokens_per_s) + " tok/s" +
                       extra(cmd.after_speed, r.metrics);
    if (*last_val >= 0) line += " val " + fmt("%.3f", *last_val);
    line += launch_note();
    progress.update(static_cast<double>(r.step) / static_cast<double>(r.steps), line, r.step == r.steps);
  };
  return hooks;
}

int report_fine_tune(const train::TrainResult& res, const train::TrainConfig& c, const std::string& output_dir) {
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
              output_dir.c_str(), svg.c_str());
  return 0;
}

}  // namespace lathe::cli
