// lathe pretrain RECIPE.yaml [key=value ...] [--resume | --overwrite]: the pre-training loop with a progress bar,
// metrics in <run>/metrics.jsonl, checkpoints, a loss curve and generated samples at the end.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/infer/generate.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/train/data_loader.h"
#include "lathe/train/trainer.h"
#include "plot.h"
#include "progress.h"
#include "train_command.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

std::string duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof(buf), "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else std::snprintf(buf, sizeof(buf), "%ldm%02lds", t / 60, t % 60);
  return buf;
}

// The manifest `lathe data prepare` wrote next to the shards (an empty object when there is none): the
// tokenizer and the document delimiter the model was trained with, which the samples use.
nlohmann::json manifest_of(const std::string& train_data) {
  nlohmann::json manifest = train::read_manifest(train_data);
  return manifest.is_object() ? manifest : nlohmann::json::object();
}

}  // namespace

const CommandSpec& pretrain_spec() {
  static const CommandSpec spec{
      .name = "pretrain",
      .usage = "RECIPE.yaml [key=value ...] [options]",
      .brief = "pre-train as the recipe says (progress, checkpoints, samples)",
      .summary = "Trains a model as the recipe says (docs/recipes.md); key=value overrides any recipe key, e.g.\n"
                 "schedule.steps=500 optimizer.lr=1e-3 run.dir=runs/try2. SIGINT / SIGTERM stop after the current\n"
                 "step and write a checkpoint. Writes run.dir/{recipe.yaml, recipe.json, metrics.jsonl, loss.svg,\n"
                 "checkpoints/step_N/}; run.dir is locked (run.dir/lock) while it trains. `lathe checkpoint verify DIR` checks a\n"
                 "checkpoint's files against their checksums.\n",
      .options = {
          {"--resume", "", "continue from the newest intact checkpoint in run.dir (damaged ones are skipped, with the reason; step 0 if there is none)"},
          {"--overwrite", "", "delete the earlier run in run.dir first (without it or --resume, a folder that holds a run is refused)"},
          {"--no-samples", "", "skip the generated samples at the end"},
      }};
  return spec;
}

int cmd_pretrain(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, pretrain_spec());
  const std::optional<RecipeArgs> r = parse_recipe_args(a, pretrain_spec());
  if (!r) return a.help() ? 0 : 2;
  const std::string& recipe = r->recipe;
  train::TrainConfig cfg = train::load_recipe(recipe, r->overrides);
  LATHE_CHECK_ARG(cfg.sft.is_null(), recipe, ": an sft: section: fine-tune with `lathe sft`");
  LATHE_CHECK_ARG(cfg.dpo.is_null(), recipe, ": a dpo: section: preference-tune with `lathe dpo`");
  LATHE_CHECK_ARG(cfg.distill.is_null(), recipe, ": a distill: section: distil with `lathe distill`");
  LATHE_CHECK_ARG(cfg.grpo.is_null(), recipe, ": a grpo: section: RL post-training is not a `lathe pretrain` run");
  LATHE_CHECK_ARG(cfg.lora.is_null(), recipe, ": a lora: section: LoRA is for fine-tuning, not `lathe pretrain`");
  // The tokenizer the samples decode with is checked by the trainer before its first step.
  const bool samples = !a.has("--no-samples") && !cfg.sample_prompts.empty();

  Progress progress(5.0);
  double last_val = -1;
  train::TrainerHooks hooks;
  hooks.on_message = [&](const std::string& m) { progress.println(m); };
  hooks.on_eval = [&](const train::EvalReport& e) {
    last_val = e.val_loss;
    progress.println("step " + std::to_string(e.step) + ": val loss " + fmt("%.4f", e.val_loss));
  };
  hooks.on_step = [&](const train::StepReport& r) {
    const double eta = r.elapsed_s / static_cast<double>(r.step) * static_cast<double>(r.steps - r.step);
    std::string line = "step " + std::to_string(r.step) + "/" + std::to_string(r.steps) + " loss " +
                       fmt("%.4f", r.loss) + " lr " + fmt("%.2e", r.lr) + " gnorm " + fmt("%.2f", r.grad_norm) +
                       " " + fmt("%.0f", r.tokens_per_s) + " tok/s MFU " + fmt("%.1f%%", 100 * r.mfu) + " ETA " +
                       duration(eta);
    if (last_val >= 0) line += " val " + fmt("%.3f", last_val);
    line += launch_note();
    progress.update(static_cast<double>(r.step) / static_cast<double>(r.steps), line, r.step == r.steps);
  };
  std::printf("lathe pretrain %s -> %s\n", recipe.c_str(), cfg.run_dir.c_str());
  std::fflush(stdout);
  train::Trainer trainer(cfg, hooks);  // run.dir stays locked while `trainer` lives
  train::TrainResult res;
  {
    const StopSignals stop;
    res = trainer.run(r->mode);
    progress.finish();
  }

  const std::string svg = (fs::path(cfg.run_dir) / "loss.svg").string();
  write_training_plot(cfg.run_dir, svg);
  if (res.stopped_early) {
    std::printf("stopped at step %lld; checkpoint %s (continue with --resume)\n", (long long)res.steps_done,
                res.last_checkpoint.c_str());
    return 130;
  }
  std::printf("done: %lld steps in %s, final train loss %.4f", (long long)res.steps_done,
              duration(progress.elapsed()).c_str(), res.final_loss);
  if (res.final_val_loss >= 0) std::printf(", val loss %.4f", res.final_val_loss);
  std::printf("\ncheckpoint: %s\nloss curve: %s\n", res.last_checkpoint.c_str(), svg.c_str());
  int rc = 0;
  if (cfg.target_val_loss > 0 && res.final_val_loss >= 0) {
    const bool ok = res.final_val_loss <= cfg.target_val_loss;
    std::printf("target val loss %.3f: %s\n", cfg.target_val_loss, ok ? "reached" : "NOT reached");
    if (!ok) rc = 3;
  }

  if (samples) {
    const nlohmann::json manifest = manifest_of(cfg.train_data);
    const std::string tok_path = manifest.contains("tokenizer") ? manifest["tokenizer"].get<std::string>() : "";
    if (tok_path.empty()) {
      std::printf("samples: skipped (no tokenizer recorded next to the training shards)\n");
    } else {
      Context ctx(resolve_thread_count(cfg.threads));  // run.threads, as training
      ContextScope scope(ctx);
      const auto tok = tokenizer::Tokenizer::load(tok_path);
      auto model = Model::load(res.last_checkpoint);
      std::printf("samples (greedy):\n");
      // Opened every training document; read_manifest checked it is an id of the vocabulary.
      const int32_t delimiter = manifest.contains("delimiter_id") ? manifest["delimiter_id"].get<int32_t>() : -1;
      for (const auto& prompt : cfg.sample_prompts) {
        std::vector<int32_t> ids;
        if (delimiter >= 0) ids.push_back(delimiter);
        for (uint32_t id : tok.encode_ids(prompt, false)) ids.push_back(static_cast<int32_t>(id));
        // The model's context bounds prompt + sample (validate_recipe_for_model checked max_tokens alone).
        const int64_t n_ctx = model->config().max_positions, n_prompt = static_cast<int64_t>(ids.size());
        if (n_ctx > 0 && n_prompt >= n_ctx) {
          std::printf("  %s| (skipped: the prompt is %lld tokens, the context %lld)\n", prompt.c_str(),
                      (long long)n_prompt, (long long)n_ctx);
          continue;
        }
        GenerateOptions o;
        o.max_new_tokens = static_cast<int>(n_ctx > 0 ? std::min(cfg.sample_tokens, n_ctx - n_prompt) : cfg.sample_tokens);
        if (tok.special_tokens().eos_id) o.stop_token_ids.push_back(static_cast<int>(*tok.special_tokens().eos_id));
        if (tok.special_tokens().bos_id) o.stop_token_ids.push_back(static_cast<int>(*tok.special_tokens().bos_id));
        const GenerateResult g = generate(*model, ids, o);
        std::vector<uint32_t> out(g.tokens.begin() + g.n_prompt, g.tokens.end());
        std::printf("  %s|%s\n", prompt.c_str(), tok.decode(out, true).c_str());
      }
    }
  }
  return rc;
}

}  // namespace lathe::cli
