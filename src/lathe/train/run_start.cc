#include "lathe/train/run_start.h"

#include <filesystem>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/rank_sync.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// "a, b, c and 4 more" for messages.
std::string first_few(const std::vector<std::string>& items, size_t n = 3) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < n; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > n) out += str_cat(" and ", items.size() - n, " more");
  return out;
}

}  // namespace

void prepare_run_folder(const TrainConfig& cfg, StartMode mode, dist::Communicator& comm,
                        std::unique_ptr<RunLock>& lock, const Note& note) {
  on_lead(comm, "run folder " + cfg.run_dir, [&] {
    fs::create_directories(cfg.run_dir);
    lock.reset();  // a second run of this trainer: flock conflicts with this process's own earlier lock
    lock = std::make_unique<RunLock>(RunLock::acquire(cfg.run_dir));
    // What an earlier run left (read only where it matters: a resume continues it whatever it holds).
    const std::vector<std::string> earlier =
        mode == StartMode::kResume ? std::vector<std::string>{} : earlier_run_contents(cfg.run_dir);
    // The run writes run.dir/recipe.yaml (the resolved recipe): never over the recipe it was started with,
    // unless it continues the run that saved it.
    std::error_code ec;
    const bool continues_a_run =
        mode == StartMode::kResume && !checkpoint_folders(fs::path(cfg.run_dir) / "checkpoints").empty();
    LATHE_CHECK_ARG(continues_a_run || cfg.recipe_path.empty() ||
                        !fs::equivalent(cfg.recipe_path, fs::path(cfg.run_dir) / "recipe.yaml", ec),
                    "the recipe ", cfg.recipe_path, " is run.dir's recipe.yaml, which the run writes (the resolved ",
                    "recipe): copy it elsewhere, or choose another run.dir");
    if (mode == StartMode::kOverwrite) {
      remove_earlier_run(cfg.run_dir);
      if (!earlier.empty()) note("--overwrite: removed the earlier run in " + cfg.run_dir + " (" + first_few(earlier) + ")");
    } else if (mode == StartMode::kFresh && !earlier.empty()) {
      throw InvalidArgument(str_cat("run folder ", cfg.run_dir, " already holds a run (", first_few(earlier),
                                    "): pass --resume to continue it, or --overwrite to delete it and start over, "
                                    "or choose another run.dir"));
    }
  });
}

std::optional<std::string> resume_checkpoint(const std::string& run_dir, StartMode mode, const Note& note) {
  if (mode != StartMode::kResume) return std::nullopt;
  const ResumePoint rp = find_resume_checkpoint(run_dir);
  for (const std::string& s : rp.skipped) note("resume: skipped checkpoint " + s);
  if (!rp.dir && !rp.skipped.empty())
    throw IoError(str_cat(run_dir, ": no intact checkpoint to resume from (", rp.skipped.size(),
                          " damaged; the newest: ", rp.skipped.front(), "); `lathe checkpoint verify ", run_dir,
                          "` checks every file; --overwrite starts the run over"));
  return rp.dir;
}

std::unique_ptr<Model> open_model(const TrainConfig& cfg, const std::optional<std::string>& checkpoint) {
  if (checkpoint) return Model::load(*checkpoint, {.force_f32 = true});
  if (!cfg.model_base.empty()) {
    LoadOptions o{.force_f32 = true};
    // QLoRA: the base's decoder Linears quantised as they load (their f32 copies never held).
    if (!cfg.model_quantize.empty()) o.quantize_linears = parse_quant_spec(cfg.model_quantize);
    return Model::load(cfg.model_base, o);
  }
  return Model::create(cfg.model_config.dump(2), cfg.seed);
}

// Of `run`, only the seed and the precision change the losses (threads, recompute, the all-reduce mode
// and ZeRO give the same bits or the same values within float tolerance).
std::string trajectory_hash(json recipe) {
  json run = json::object();
  for (const char* k : {"seed", "precision"})
    if (recipe.contains("run") && recipe["run"].contains(k)) run[k] = recipe["run"][k];
  for (const char* k : {"run", "eval", "checkpoint", "samples", "memory"}) recipe.erase(k);
  recipe["run"] = run;
  if (recipe.contains("schedule")) recipe["schedule"].erase("steps");
  return std::to_string(hash_name(recipe.dump()));
}

}  // namespace lathe::train
