#include "lathe/posttrain/posttrain_run.h"

#include <filesystem>

#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/dist/communicator.h"

namespace lathe::posttrain {

namespace fs = std::filesystem;

std::string output_dir(const train::TrainConfig& cfg) {
  return (fs::path(cfg.run_dir) / (cfg.lora.is_null() ? "model" : "adapter")).string();
}

train::TrainResult run_and_export(train::TrainLoop& loop, train::StartMode mode, const MakeObjective& make_objective) {
  dist::Communicator& comm = dist::world();
  Context ctx(train::train_thread_count(loop.config().threads, comm));  // first: outlives what it runs
  ContextScope scope(ctx);
  const std::unique_ptr<train::Objective> objective = make_objective(comm.size());
  train::TrainResult r = loop.run(*objective, mode, ctx);
  if (!r.stopped_early && comm.rank() == 0 && !r.last_checkpoint.empty())
    export_hf_folder(r.last_checkpoint, output_dir(loop.config()));
  return r;
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
