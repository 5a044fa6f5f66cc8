#include "lathe/posttrain/sft_trainer.h"

#include <filesystem>

#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/dist/communicator.h"
#include "lathe/posttrain/sft_objective.h"

namespace lathe::posttrain {

namespace fs = std::filesystem;

namespace {

train::TrainConfig with_defaults(train::TrainConfig cfg, SftOptions& opts) {
  opts = sft_options(cfg);  // also writes the sft defaults into cfg.resolved
  return cfg;
}

}  // namespace

SftTrainer::SftTrainer(train::TrainConfig cfg, train::TrainerHooks hooks)
    : loop_(with_defaults(std::move(cfg), opts_), std::move(hooks)) {}

train::TrainResult SftTrainer::run(train::StartMode mode) {
  dist::Communicator& comm = dist::world();
  Context ctx(train::train_thread_count(loop_.config().threads, comm));  // first: outlives what it runs
  ContextScope scope(ctx);
  SftObjective objective(opts_, comm.size());
  train::TrainResult r = loop_.run(objective, mode, ctx);
  if (!r.stopped_early && comm.rank() == 0 && !r.last_checkpoint.empty())
    export_hf_folder(r.last_checkpoint, output_dir());
  return r;
}

std::string SftTrainer::output_dir() const {
  return (fs::path(loop_.config().run_dir) / (loop_.config().lora.is_null() ? "model" : "adapter")).string();
}

void export_hf_folder(const std::string& ckpt, const std::string& out) {
  const fs::path tmp = fs::path(out).parent_path() / (".tmp." + fs::path(out).filename().string());
  try {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    for (const auto& e : fs::directory_iterator(ckpt)) {
      const std::string name = e.path().filename().string();
      if (name == "optimizer.safetensors" || name == "state.json" || name == "DONE" || !e.is_regular_file()) continue;
      fs::copy_file(e.path(), tmp / name);
    }
    fs::remove_all(out);
    fs::rename(tmp, out);
  } catch (const fs::filesystem_error& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw IoError(str_cat("exporting ", ckpt, " to ", out, ": ", e.what()));
  }
}

}  // namespace lathe::posttrain
